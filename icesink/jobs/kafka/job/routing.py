"""Many topics into many tables: the Kafka job's routing keys, checked against the decoding.

The job routes with the sink's own ``route.*`` options (``docs/routing.md``), set under
``sink:`` in the YAML file or with flags::

    --topic-pattern 'shop\\..*' --route-by topic --table-template 'raw.{topic}'
    --topics events --route-by field --route-field type --route-tables '{"click": "ev.clicks"}'

    sink:
      route.by: topic                      # or field (with route.field), or none
      route.table-template: raw.{topic}
      route.tables: {click: ev.clicks}     # a mapping here, JSON text as a flag
      route.table-options: {"raw.orders*": {partition-by: day(ts)}}

``route.by=topic`` routes by the ``_kafka_topic`` column, so it needs the metadata
columns (``value.metadata-columns``, on by default). ``--upsert-key`` on a routed job
upserts every routed table: its ``write.mode`` and ``upsert.key-columns`` go into
``route.table-options`` (as the pattern ``*``, and into every pattern that sets no
``write.mode`` of its own).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from icesink import ConfigError

#: The job's routing flags (argparse destinations) -> the sink options they set.
ROUTE_FLAGS = {
    "route_by": "route.by",
    "route_field": "route.field",
    "table_template": "route.table-template",
    "route_tables": "route.tables",
}
_PER_TABLE_UPSERT_KEYS = ("write.mode", "upsert.key-columns")


def route_by(options: Mapping[str, str | None]) -> str:
    """The ``route.by`` of the sink options (lower case), ``none`` when not set."""
    for key, value in options.items():
        if key.strip().lower() == "route.by" and value is not None:
            return value.strip().lower() or "none"
    return "none"


def is_routed(options: Mapping[str, str | None]) -> bool:
    """Whether the sink options route rows to many tables."""
    return route_by(options) != "none"


def check_routing(options: Mapping[str, str | None], metadata_columns: bool) -> None:
    """Routing the decoding can feed: ``route.by=topic`` needs the ``_kafka_topic`` column.

    Args:
        options: The sink options.
        metadata_columns: Whether the decoder adds the ``_kafka_*`` columns.

    Raises:
        ConfigError: Naming the keys and the fix.
    """
    if route_by(options) == "topic" and not metadata_columns:
        raise ConfigError(
            "invalid configuration: key 'sink.route.by' is 'topic' but 'value.metadata-columns' is false: "
            "the rows carry their topic in the _kafka_topic metadata column",
            hint="remove --no-metadata-columns (value.metadata-columns: true), or route by a field",
        )


def upserted_tables(options: Mapping[str, str | None]) -> dict[str, str | None]:
    """A routed job's sink options with ``write.mode``/``upsert.key-columns`` moved per table.

    Unrouted, or not upserting: ``options`` unchanged.

    Raises:
        ConfigError: ``route.table-options`` is not a JSON object.
    """
    lowered = {k.strip().lower(): k for k in options}
    mode = str(options.get(lowered.get("write.mode", ""), "") or "").strip().lower()
    if not is_routed(options) or mode != "upsert":
        return dict(options)
    moved = {key: str(options[lowered[key]]) for key in _PER_TABLE_UPSERT_KEYS if key in lowered}
    result = {k: v for k, v in options.items() if k.strip().lower() not in _PER_TABLE_UPSERT_KEYS}
    per_table = _table_options(options.get(lowered.get("route.table-options", "")))
    for overrides in per_table.values():
        if not any(k.strip().lower() == "write.mode" for k in overrides):
            overrides.update(moved)
    per_table.setdefault("*", moved)
    result.pop(lowered.get("route.table-options", ""), None)
    result["route.table-options"] = json.dumps(per_table)
    return result


def _table_options(text: str | None) -> dict[str, dict[str, str]]:
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"invalid configuration: key 'sink.route.table-options' has value {text!r}, not JSON: {e}",
            hint='e.g. {"raw.orders*": {"partition-by": "day(ts)"}}',
        ) from e
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ConfigError(
            f"invalid configuration: key 'sink.route.table-options' has value {text!r}, "
            "not an object of table patterns to options",
            hint='e.g. {"raw.orders*": {"partition-by": "day(ts)"}}',
        )
    return {str(k): {str(o): str(v) for o, v in opts.items()} for k, opts in data.items()}
