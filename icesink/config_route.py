"""The routing section of the sink's configuration (``route.*``): many tables from one stream.

Kept apart from :mod:`icesink.config` like :mod:`icesink.config_upsert`. With ``route.by`` set
to ``topic`` or ``field``, each row's destination value names its table, through
``route.table-template`` or the explicit map ``route.tables``; ``route.table-options``
overrides the sink's options for the tables whose names match a pattern. How a value
becomes a table name is :mod:`icesink.destinations.naming`.
"""

from __future__ import annotations

import json
import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from icesink.config_upsert import UpsertConfig, with_table_options
from icesink.errors import ConfigError, PartitionSpecError
from icesink.partitioning import check_terms, parse_partition_by

TOPIC_COLUMNS = ("_kafka_topic", "topic")  # route.by=topic: the first of these the batch has
PLACEHOLDERS = ("{value}", "{topic}")  # in route.table-template; {topic} is an alias of {value}
# route.table-options keys (lower case) -> what a table's options may override.
TABLE_OPTION_KEYS = (
    "partition-by",
    "write.target-file-size-bytes",
    "write.parquet.row-group-size-bytes",
    "write.parquet.compression-codec",
    "write.mode",
    "upsert.key-columns",
)
TABLE_PROPERTY_PREFIX = "table-property."
# The longest name a routed table may have, ``namespace.table`` in UTF-8 bytes: it is one
# folder name of the sink's state (at most 255 bytes on every file system) and fits the
# table names of every catalog (Hive's metastore took 128 characters).
MAX_TABLE_NAME_BYTES = 128
# route.max-tables: the most tables route.table-template makes; new values' rows are then dead letters.
DEFAULT_MAX_TABLES = 1000
_CODECS = frozenset({"zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"})
_IDENTIFIER = re.compile(r"^[^.\s]+(\.[^.\s]+)+$")


class RouteBy(StrEnum):
    """Where a row's destination value comes from (``route.by``)."""

    NONE = "none"  # one table: the 'table' option
    TOPIC = "topic"  # the row's Kafka topic (column _kafka_topic, else topic)
    FIELD = "field"  # the column named by route.field


class RouteConfig(BaseModel):
    """How the rows of a batch are routed to tables.

    Attributes:
        by: ``none`` (default), ``topic`` or ``field`` (``route.by``).
        field: The top-level column naming the destination (``route.field``), for ``by=field``.
        table_template: The table name with ``{value}`` (or ``{topic}``) in it
            (``route.table-template``), e.g. ``raw.{topic}``; ``{value}`` alone when the
            value is a whole table name, ``ev.clicks`` (each part sanitized).
        tables: Destination value -> table (``route.tables``, JSON text); a value not in
            it is a dead letter.
        table_options: Table-name glob -> option overrides (``route.table-options``, JSON
            text); the first matching pattern, in order, applies.
        max_tables: The most tables the template may name (``route.max-tables``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    by: RouteBy = RouteBy.NONE
    field: str | None = None
    table_template: str | None = None
    tables: dict[str, str] | None = None
    table_options: tuple[tuple[str, dict[str, str]], ...] = ()
    max_tables: int = Field(
        default=DEFAULT_MAX_TABLES,
        ge=1,
        description="route.max-tables: the most tables route.table-template may name, counted in the "
        "catalog (the template's tables there when the sink first needs a new one, plus those it "
        "creates). Rows of a value that would need a table past it go to the dead-letter table with "
        "reason 'too_many_tables' (alert IcesinkRoutedTablesExhausted) and the stream goes on; tables "
        "that exist always take their rows. Not applied to route.tables, which lists its tables.",
    )

    @field_validator("field", "table_template")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("tables", mode="before")
    @classmethod
    def _tables_json(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        data = _json_object(value, '{"click": "events.clicks"}')
        bad = {k: v for k, v in data.items() if not isinstance(v, str) or not _IDENTIFIER.match(v)}
        if bad:
            raise ValueError(f"values {bad} are not qualified table names 'namespace.table'")
        long = sorted(v for v in data.values() if len(v.encode()) > MAX_TABLE_NAME_BYTES)
        if long:
            raise ValueError(f"table names {long} are longer than {MAX_TABLE_NAME_BYTES} bytes")
        return data

    @field_validator("table_options", mode="before")
    @classmethod
    def _table_options_json(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = _json_object(value, '{"raw.orders*": {"partition-by": "day(ts)"}}')
        if isinstance(value, dict):
            value = tuple(value.items())
        return tuple((pattern, _overrides(pattern, options)) for pattern, options in value)

    @property
    def enabled(self) -> bool:
        """Whether rows are routed to many tables."""
        return self.by is not RouteBy.NONE


def _json_object(text: str, example: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"must be a JSON object, e.g. {example}: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"must be a JSON object, e.g. {example}")
    return data


def _overrides(pattern: Any, options: Any) -> dict[str, str]:
    """The overrides of one pattern, keys lower-cased; a bad pattern or key is an error naming it."""
    if not isinstance(pattern, str) or not pattern.strip() or any(c.isspace() for c in pattern):
        raise ValueError(f"pattern {pattern!r} is not a table-name glob such as 'raw.orders_*'")
    if pattern.count("[") != pattern.count("]"):
        raise ValueError(f"pattern {pattern!r} has an unbalanced '[' ... ']'")
    if not isinstance(options, dict):
        raise ValueError(f"the options of pattern {pattern!r} must be a JSON object of option -> value")
    result = {str(k).strip().lower(): str(v) for k, v in options.items()}
    unknown = sorted(
        k for k in result if k not in TABLE_OPTION_KEYS and not k.startswith(TABLE_PROPERTY_PREFIX)
    )
    if unknown:
        raise ValueError(
            f"pattern {pattern!r} sets options {unknown} that cannot be set per table; "
            f"accepted: {', '.join(TABLE_OPTION_KEYS)}, {TABLE_PROPERTY_PREFIX}*"
        )
    _check_values(pattern, result)
    return result


def _check_values(pattern: str, options: dict[str, str]) -> None:
    """The values of one pattern's overrides; an error names the pattern, the option and the value."""
    for key in ("write.target-file-size-bytes", "write.parquet.row-group-size-bytes"):
        if key in options and (not options[key].isdigit() or int(options[key]) < 1024):
            raise ValueError(f"pattern {pattern!r}: {key} {options[key]!r} is not a whole number >= 1024")
    codec = options.get("write.parquet.compression-codec")
    if codec is not None and codec.lower() not in _CODECS:
        raise ValueError(f"pattern {pattern!r}: compression codec {codec!r} is not one of {sorted(_CODECS)}")
    mode = options.get("write.mode", "append").lower()
    if mode not in ("append", "upsert"):
        raise ValueError(f"pattern {pattern!r}: write.mode {mode!r} is not 'append' or 'upsert'")
    try:
        check_terms(parse_partition_by(options.get("partition-by")), case_sensitive=False)
    except PartitionSpecError as e:
        raise ValueError(f"pattern {pattern!r}: partition-by {options['partition-by']!r}: {e.message}") from e


def check_route(
    route: RouteConfig,
    table: str,
    upsert: UpsertConfig,
) -> None:
    """Routing options that fit together: a source of names, nothing routing cannot do, keys for upserts.

    Args:
        route: The routing section.
        table: The ``table`` option ('' when not given).
        upsert: The sink's upsert section (the default of every routed table).

    Raises:
        ConfigError: Naming the options and the fix.
    """
    if not route.enabled:
        _check_unrouted(route, table)
        return
    if route.by is RouteBy.FIELD and not route.field:
        raise ConfigError(
            "option 'route.by' is 'field' but 'route.field' is not set",
            hint="set route.field to the top-level column whose value names the table",
        )
    if route.by is RouteBy.TOPIC and route.field:
        raise ConfigError(
            f"option 'route.field' is {route.field!r} but 'route.by' is 'topic'",
            hint="use route.by=field to route by that column, or remove route.field",
        )
    if route.tables is None and route.table_template is None:
        raise ConfigError(
            f"option 'route.by' is {route.by.value!r} but neither 'route.table-template' "
            "nor 'route.tables' is set",
            hint="set route.table-template (e.g. 'raw.{topic}') or route.tables (JSON value -> table)",
        )
    if route.table_template is not None:
        check_template(route.table_template)
    for pattern, options in route.table_options:
        _check_upserted_pattern(pattern, options, upsert)


def _check_upserted_pattern(pattern: str, options: dict[str, str], upsert: UpsertConfig) -> None:
    """A pattern that upserts has key columns (its own or the sink's), none of them a change column."""
    try:
        table = with_table_options(upsert, options)
    except ValidationError as e:
        raise ConfigError(
            f"route.table-options pattern {pattern!r}: upsert.key-columns "
            f"{options.get('upsert.key-columns')!r} is not a list of column names",
            hint="give a comma-separated list of column names, e.g. 'id' or 'tenant,id'",
        ) from e
    names = set(table.key_columns)
    if table.enabled:
        if not names:
            raise ConfigError(
                f"route.table-options pattern {pattern!r} upserts (write.mode=upsert) "
                "without upsert.key-columns",
                hint=f'add the key columns to the pattern, e.g. {{"{pattern}": {{"write.mode": "upsert", '
                '"upsert.key-columns": "id"}}',
            )
        clash = sorted(names & set(upsert.change_columns))
        if clash:
            raise ConfigError(
                f"route.table-options pattern {pattern!r}: upsert.key-columns names {clash}, "
                "which is the op or order column",
                hint="the op and order columns describe a change and are not stored: pick other key columns",
            )
    elif "upsert.key-columns" in options:
        raise ConfigError(
            f"route.table-options pattern {pattern!r} sets upsert.key-columns "
            f"{options['upsert.key-columns']!r} but its write.mode is 'append'",
            hint="add write.mode=upsert to the pattern to upsert its tables by these keys, "
            "or remove upsert.key-columns",
        )


def _check_unrouted(route: RouteConfig, table: str) -> None:
    if not table:
        raise ConfigError("option 'table' is not set", hint="set 'table' to 'namespace.table'")
    given = [
        key
        for key, value in (
            ("route.field", route.field),
            ("route.table-template", route.table_template),
            ("route.tables", route.tables),
            ("route.table-options", route.table_options or None),
            ("route.max-tables", route.max_tables if route.max_tables != DEFAULT_MAX_TABLES else None),
        )
        if value is not None
    ]
    if given:
        raise ConfigError(
            f"options {given} are set but 'route.by' is 'none'",
            hint="set route.by=topic or route.by=field to route rows to many tables",
        )


def route_label(route: RouteConfig) -> str:
    """What names a routed sink where no single table does (metrics of shared steps, dead letters)."""
    return route.table_template or "route.tables"


def default_dead_letter_table(route: RouteConfig) -> str:
    """The dead-letter table of a routed sink without ``table``: ``<namespace>.routed__dlq``.

    The namespace is the template's, else that of the first table of ``route.tables``.

    Raises:
        ConfigError: The namespace depends on the destination value: ``dead-letter.table`` must be set.
    """
    names = [route.table_template] if route.table_template else sorted((route.tables or {}).values())
    namespace = names[0].rsplit(".", 1)[0] if names else ""
    if not namespace or any(p in namespace for p in PLACEHOLDERS):
        raise ConfigError(
            "a routed sink without 'table' needs 'dead-letter.table': the namespace of "
            f"route.table-template {route.table_template!r} depends on the destination value",
            hint="set dead-letter.table to 'namespace.table', e.g. 'raw.routed__dlq'",
        )
    return f"{namespace}.routed__dlq"


def whole_name_template(template: str) -> bool:
    """Whether ``template`` is ``{value}`` (or ``{topic}``) alone: the value names namespace and table."""
    return template in PLACEHOLDERS


def check_template(template: str) -> None:
    """``template`` is ``namespace.name`` with ``{value}`` or ``{topic}`` in the name part, or one alone.

    Raises:
        ConfigError: Naming the template and what it lacks.
    """
    if whole_name_template(template):
        return
    stripped = template
    for placeholder in PLACEHOLDERS:
        stripped = stripped.replace(placeholder, "x")
    if not any(p in template for p in PLACEHOLDERS):
        raise ConfigError(
            f"option 'route.table-template' is {template!r}, without '{{value}}' or '{{topic}}'",
            hint="put the destination value into the table name, e.g. 'raw.{topic}' or 'events.{value}'",
        )
    if "{" in stripped or "}" in stripped or not _IDENTIFIER.match(stripped):
        raise ConfigError(
            f"option 'route.table-template' is {template!r}, not 'namespace.name' with '{{value}}' "
            "or '{topic}' as its only placeholders",
            hint="use a template such as 'raw.{topic}' or 'events.{value}_v1', or '{value}' alone "
            "for values that are whole table names ('ev.clicks')",
        )
    fixed = template
    for placeholder in PLACEHOLDERS:
        fixed = fixed.replace(placeholder, "")
    if len(fixed.encode()) >= MAX_TABLE_NAME_BYTES:
        raise ConfigError(
            f"option 'route.table-template' is {template!r}, which leaves no room for the value in a "
            f"table name of at most {MAX_TABLE_NAME_BYTES} bytes",
            hint="use a shorter namespace and table name around '{value}'",
        )
