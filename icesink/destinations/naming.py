"""Destination values -> table names: the template, sanitizing, limits and ``route.tables``.

With ``route.table-template`` a value is sanitized into an identifier part (lower case,
every character outside ``[a-z0-9_]`` becomes ``_``, a leading digit gets ``t_`` before
it) and put in place of ``{value}`` (or ``{topic}``). With ``{value}`` alone the value is
a whole table name, ``namespace.table`` (Iceberg Kafka Connect's ``route-field``
convention), and each of its two parts is sanitized. Sanitizing is deterministic but not
one to one: which value a table holds the rows of is recorded with the table and checked
on every batch (:mod:`icesink.destinations.owners`). With ``route.tables`` only the values it
lists have a table.

A value that cannot name a table is unroutable: its rows are dead letters whose reason
says why (:func:`dead_letter_reason`), and the stream goes on. So are a null and an
empty value, a value not in ``route.tables``, a value whose table name would be longer
than :data:`~icesink.config_route.MAX_TABLE_NAME_BYTES`, and a value naming the sink's
dead-letter table.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping

from icesink.config_route import MAX_TABLE_NAME_BYTES, PLACEHOLDERS, RouteConfig, whole_name_template
from icesink.errors import ConfigError
from icesink.schema.primitives import BadRecordReason

_NOT_ALLOWED = re.compile(r"[^a-z0-9_]")
_SHOWN_CHARACTERS = 80  # of a value quoted in a reason
_KEPT_VALUES = 100_000  # values whose table is kept at hand


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
    """The table of ``value`` under ``template`` (``raw.{topic}``, ``events.{value}``, ``{value}``).

    Raises:
        ConfigError: Under ``{value}`` alone, ``value`` is not ``namespace.table``.
    """
    if whole_name_template(template):
        parts = value.split(".")
        if len(parts) != 2 or not all(parts):
            raise ConfigError(
                f"value {shown(value)} is not a table name 'namespace.table', as route.table-template "
                f"{template!r} wants",
                hint="give whole table names such as 'ev.clicks', or use a template such as 'ev.{value}'",
            )
        return ".".join(sanitize(p) for p in parts)
    part = sanitize(value)
    for placeholder in PLACEHOLDERS:
        template = template.replace(placeholder, part)
    return template


def shown(value: str) -> str:
    """``value`` quoted for a message, its middle left out when it is long."""
    if len(value) <= _SHOWN_CHARACTERS:
        return repr(value)
    half = _SHOWN_CHARACTERS // 2
    return repr(f"{value[:half]}...{value[-half:]}") + f" ({len(value)} characters)"


def dead_letter_reason(reason: BadRecordReason, why: str) -> str:
    """A routed row's dead-letter reason: its code, then why (``unroutable: ...``)."""
    return f"{reason.value}: {why}"


class DestinationNames:
    """Names the tables of destination values, the same way for the sink's whole lifetime.

    Args:
        route: The routing options.
        reserved: Tables no value may name (the dead-letter table).
    """

    def __init__(self, route: RouteConfig, reserved: Iterable[str] = ()) -> None:
        self._route = route
        self._reserved = {name.lower() for name in reserved}
        self._tables: dict[str, str] = {}  # value -> table, of routable values
        self._lock = threading.Lock()

    def describe_unroutable(self, value: str | None) -> str:
        """Why ``value`` has no table, for its dead letter and logs."""
        if value is None:
            return "the destination value is null"
        if not value:
            return "the destination value is empty"
        return self._name(value)[1] or f"value {shown(value)} is not a key of route.tables"

    def reason(self, value: str, refused: Mapping[str, str]) -> str:
        """Why an unroutable value's rows are dead letters (``refused``: values refused a table -> why)."""
        return refused.get(value) or dead_letter_reason(
            BadRecordReason.UNROUTABLE, self.describe_unroutable(value)
        )

    def tables_of(self, values: Iterable[str | None]) -> dict[str | None, str | None]:
        """Each value's table, ``None`` for an unroutable value (see the module docstring)."""
        result: dict[str | None, str | None] = {}
        with self._lock:
            for value in values:
                result[value] = self._table_of(value) if value else None
        return result

    def _table_of(self, value: str) -> str | None:
        known = self._tables.get(value)
        if known is not None:
            return known
        table, _ = self._name(value)
        if table is not None:
            if len(self._tables) >= _KEPT_VALUES:  # a stream of garbage values: naming again is cheap
                self._tables.clear()
            self._tables[value] = table
        return table

    def _name(self, value: str) -> tuple[str | None, str | None]:
        """The table of a value not seen before, or ``None`` and why."""
        if self._route.tables is not None:
            return self._route.tables.get(value), None
        assert self._route.table_template is not None  # checked with the options
        try:
            table = from_template(self._route.table_template, value)
        except ConfigError as e:
            return None, e.message
        size = len(table.encode())
        if size > MAX_TABLE_NAME_BYTES:
            return None, (
                f"value of {len(value)} characters makes a table name of {size} bytes, over the "
                f"{MAX_TABLE_NAME_BYTES} a routed table's name may have; map it with route.tables"
            )
        if table.lower() in self._reserved:
            return None, f"value {shown(value)} makes table {table!r}, the sink's dead-letter table"
        return table, None
