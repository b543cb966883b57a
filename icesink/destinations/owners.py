"""Which destination value a routed table holds, and how many tables the template may make.

Sanitizing is not one to one (``pay-in`` and ``pay.in`` both make ``events.pay_in``), so
a table named by ``route.table-template`` records the value it holds the rows of in its
property :data:`ROUTE_VALUE_PROPERTY` (set when the sink creates it; an existing table
without one is claimed by the first value routed to it: on a SQL catalog only if the table
has not moved since it was loaded; a REST catalog checks only that no snapshot came
meanwhile, as Iceberg has no requirement on a property). Every batch checks it, so a
second value is refused whether it comes in the same batch, after a restart or from
another sink: its rows go to the dead-letter table with both values in the reason. Of two
new values of one batch, the first in sort order gets the table, so a replay decides the
same way.

:class:`TableBudget` bounds the tables the template makes (``route.max-tables``): the
template's tables in the catalog, listed when the sink first needs a new one, plus those
it creates. A value that would need one more is refused (``too_many_tables``); a table
that exists always takes its rows. Sinks running at once each count their own creations,
so together they may pass the bound by what each created since it listed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchNamespaceError
from pyiceberg.table import Table
from pyiceberg.table.update import AssertRefSnapshotId, AssertTableUUID, SetPropertiesUpdate

from icesink.commit import metadata_cache
from icesink.config_route import PLACEHOLDERS, RouteConfig, whole_name_template
from icesink.destinations.naming import dead_letter_reason, shown
from icesink.errors import CommitConflictError
from icesink.schema.primitives import BadRecordReason

ROUTE_VALUE_PROPERTY = "icesink.route.value"
_CLAIM_TRIES = 5


def owner_of(table: Table) -> str | None:
    """The destination value ``table`` holds the rows of, if recorded."""
    return table.metadata.properties.get(ROUTE_VALUE_PROPERTY)


def check_owner(table: Table, name: str, values: Sequence[str]) -> tuple[Table, dict[str, str]]:
    """The values of ``values`` that ``table`` does not hold, each with its dead-letter reason.

    A table without an owner is claimed for the first of ``values`` (a property commit,
    retried when another writer commits meanwhile).

    Raises:
        CommitConflictError: The claim lost every race.
    """
    for _ in range(_CLAIM_TRIES):
        owner = owner_of(table)
        if owner is not None:
            return table, {v: collision_reason(v, owner, name) for v in values if v != owner}
        claim = (SetPropertiesUpdate(updates={ROUTE_VALUE_PROPERTY: sorted(values)[0]}),)
        unmoved = (  # Iceberg has no requirement on a property: the table's own commits stand for it
            AssertTableUUID(uuid=table.metadata.table_uuid),
            AssertRefSnapshotId(ref="main", snapshot_id=table.metadata.current_snapshot_id),
        )
        try:
            metadata_cache.commit(table, claim, unmoved)  # on a SQL catalog only if the table has not moved
        except CommitFailedException:
            metadata_cache.refresh(table)
    raise CommitConflictError(
        f"recording the destination value of table {name} lost {_CLAIM_TRIES} races with other writers",
        table=name,
        hint="the batch is retried; if it keeps failing, set the table property "
        f"{ROUTE_VALUE_PROPERTY} to the value whose rows it holds",
    )


def collision_reason(value: str, owner: str, name: str) -> str:
    """The dead-letter reason of ``value``'s rows when ``name`` holds ``owner``'s."""
    return dead_letter_reason(
        BadRecordReason.UNROUTABLE,
        f"values {shown(value)} and {shown(owner)} both make table {name}, which holds the rows of "
        f"{shown(owner)} (table property {ROUTE_VALUE_PROPERTY}); name their tables with route.tables",
    )


class TableBudget:
    """The tables ``route.table-template`` may still make (``route.max-tables``; see the module).

    Args:
        route: The routing options (a template, or ``route.tables``: no bound).
        catalog: The sink's catalog.
        reserved: Tables that do not count (the dead-letter table).
    """

    def __init__(self, route: RouteConfig, catalog: Catalog, reserved: Sequence[str] = ()) -> None:
        self._route = route
        self._catalog = catalog
        self._reserved = {name.lower() for name in reserved}
        self._tables: set[str] | None = None  # the template's tables, listed on first need
        self._lock = threading.Lock()

    @property
    def bounded(self) -> bool:
        """Whether tables are counted: only those of a template."""
        return self._route.tables is None and self._route.table_template is not None

    def reserve(self, name: str) -> bool:
        """Count ``name`` as one more table, unless that passes the bound."""
        if not self.bounded:
            return True
        with self._lock:
            if self._tables is None:
                self._tables = self._listed()
            if name.lower() in self._tables:
                return True
            if len(self._tables) >= self._route.max_tables:
                return False
            self._tables.add(name.lower())
            return True

    def release(self, name: str) -> None:
        """``name`` was not made after all."""
        with self._lock:
            if self._tables is not None:
                self._tables.discard(name.lower())

    def refusal(self, value: str, name: str) -> str:
        """The dead-letter reason of a value refused a new table."""
        return dead_letter_reason(
            BadRecordReason.TOO_MANY_TABLES,
            f"value {shown(value)} would make table {name}, past the {self._route.max_tables} tables "
            f"route.table-template {self._route.table_template!r} may make (route.max-tables); raise "
            "route.max-tables, or drop tables made of bad values",
        )

    def _listed(self) -> set[str]:
        """The tables of the catalog the template could have named."""
        template = self._route.table_template
        assert template is not None
        if whole_name_template(template):
            namespaces = [".".join(n) for n in self._catalog.list_namespaces()]
            pattern = re.compile(r".+")
        else:
            namespace, table = template.rsplit(".", 1)
            namespaces = [namespace]
            pattern = re.compile(_table_pattern(table))
        found = set()
        for namespace in namespaces:
            try:
                tables = self._catalog.list_tables(namespace)
            except NoSuchNamespaceError:
                continue
            for identifier in tables:
                name = ".".join(identifier).lower()
                if pattern.fullmatch(identifier[-1]) and name not in self._reserved:
                    found.add(name)
        return found


def _table_pattern(table: str) -> str:
    """A regular expression of the table names a template's table part makes."""
    pieces = re.split("|".join(re.escape(p) for p in PLACEHOLDERS), table)
    return "[a-z0-9_]+".join(re.escape(p) for p in pieces)
