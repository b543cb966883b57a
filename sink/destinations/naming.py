"""Destination values -> table names: the template, sanitizing, collisions and ``route.tables``.

With ``route.table-template`` a value is sanitized into an identifier part (lower case,
every character outside ``[a-z0-9_]`` becomes ``_``, a leading digit gets ``t_`` before
it) and put in place of ``{value}`` (or ``{topic}``). Sanitizing is deterministic but not
one to one: two values that make the same name would share a table, so
:class:`DestinationNames` remembers every value it named for the sink's lifetime and
refuses a second value for a name. With ``route.tables`` only the values it lists have
a table; any other value (and a null value) is unroutable, a dead letter.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

from sink.config_route import PLACEHOLDERS, RouteConfig
from sink.errors import ConfigError

_NOT_ALLOWED = re.compile(r"[^a-z0-9_]")


def sanitize(value: str) -> str:
    """``value`` as an identifier part: ``"Orders-EU.v2"`` -> ``"orders_eu_v2"``, ``"1x"`` -> ``"t_1x"``.

    Raises:
        ConfigError: ``value`` is empty.
    """
    if not value:
        raise ConfigError(
            "an empty destination value cannot name a table",
            hint="give every row a non-empty destination value, or map values with route.tables",
        )
    name = _NOT_ALLOWED.sub("_", value.lower())
    return f"t_{name}" if name[0].isdigit() else name


def from_template(template: str, value: str) -> str:
    """The table of ``value`` under ``template`` (``raw.{topic}``, ``events.{value}``)."""
    part = sanitize(value)
    for placeholder in PLACEHOLDERS:
        template = template.replace(placeholder, part)
    return template


class DestinationNames:
    """Names the tables of destination values, the same way for the sink's whole lifetime.

    Args:
        route: The routing options.
        reserved: Tables no value may name (the dead-letter table).
    """

    def __init__(self, route: RouteConfig, reserved: Iterable[str] = ()) -> None:
        self._route = route
        self._reserved = {name.lower() for name in reserved}
        self._tables: dict[str, str] = {}  # value -> table
        self._values: dict[str, str] = {}  # table (lower case) -> the value that named it
        self._lock = threading.Lock()

    def describe_unroutable(self, value: str | None) -> str:
        """Why ``value`` has no table, for its dead letter and logs."""
        if value is None:
            return "null destination value"
        return f"value {value!r} is not a key of route.tables"

    def tables_of(self, values: Iterable[str | None]) -> dict[str | None, str | None]:
        """Each value's table, ``None`` for an unroutable value (null, or not in ``route.tables``).

        Raises:
            ConfigError: Two values (of this call, or one named earlier) make the same table
                name; the message names both values and the table.
        """
        result: dict[str | None, str | None] = {}
        with self._lock:
            for value in values:
                result[value] = None if value is None else self._table_of(value)
        taken = sorted((v, t) for v, t in result.items() if t is not None and t.lower() in self._reserved)
        if taken:
            value, table = taken[0]
            raise ConfigError(
                f"destination value {value!r} makes table {table!r}, the sink's dead-letter table",
                table=table,
                hint="set dead-letter.table to another table, or map the value with route.tables",
            )
        return result

    def _table_of(self, value: str) -> str | None:
        known = self._tables.get(value)
        if known is not None:
            return known
        if self._route.tables is not None:
            return self._route.tables.get(value)
        assert self._route.table_template is not None  # checked with the options
        table = from_template(self._route.table_template, value)
        other = self._values.get(table.lower())
        if other is not None and other != value:
            raise ConfigError(
                f"destination values {other!r} and {value!r} both make table {table!r}",
                table=table,
                hint="name their tables explicitly with route.tables (JSON value -> table), "
                "or rename one of them at the source",
            )
        self._values[table.lower()] = value
        self._tables[value] = table
        return table
