"""The table metadata in hand: loaded, refreshed and committed without parsing it again.

A table's metadata file holds its whole history (every snapshot kept, the snapshot and
metadata logs); parsing it costs as much as the rest of a commit at a few hundred
snapshots and grows with them. The sink loads its table each batch and the committers
refresh it before each attempt, yet the table rarely moved meanwhile. This module keeps,
per catalog and table, the last metadata loaded or committed with the file it came
from. Before using it, it asks the catalog only for the table's current metadata
location (on the SQL catalog one query, :func:`icesink._pyiceberg.sql.sql_metadata_location`;
on the REST catalog a load of the referenced snapshots only,
:func:`icesink._pyiceberg.rest.table_on`): the same file, the metadata in hand is used;
another file, the table is loaded as usual. Other catalogs load or refresh as usual
every time.

Commits through :func:`commit` keep their new metadata in hand for the next batch (on
the REST catalog without parsing the server's answer when it agrees with the updates
applied here, :func:`icesink._pyiceberg.rest.commit_table_updates`).
"""

from __future__ import annotations

import threading
import weakref

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import TableRequirement, TableUpdate

from icesink._pyiceberg import commit_table_updates, table_of_metadata
from icesink._pyiceberg import rest as pyiceberg_rest
from icesink._pyiceberg.sql import sql_catalog, sql_metadata_location

_Entries = dict[tuple[str, ...], tuple[str, TableMetadata]]
_cache: weakref.WeakKeyDictionary[Catalog, _Entries] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def load_table(catalog: Catalog, identifier: str) -> Table:
    """The table ``identifier``, on the metadata in hand when it is still current.

    Raises:
        NoSuchTableError: The table does not exist.
    """
    key = Catalog.identifier_to_tuple(identifier)
    sql = sql_catalog(catalog)
    if sql is not None:
        location = sql_metadata_location(sql, key)
        if location is None:
            raise NoSuchTableError(f"Table does not exist: {identifier}")
        metadata = _in_hand(catalog, key, location)
        if metadata is not None:
            return table_of_metadata(catalog, key, metadata, location)
    elif (in_rest := _rest_table_in_hand(catalog, key)) is not None:
        return in_rest
    table = catalog.load_table(identifier)
    remember(table)
    return table


def refresh(table: Table) -> None:
    """Bring ``table`` to the catalog's current metadata, parsing it only when it is not in hand."""
    sql = sql_catalog(table.catalog)
    if sql is not None:
        location = sql_metadata_location(sql, table.name())
        if location is not None and location == table.metadata_location:
            remember(table)
            return
        metadata = None if location is None else _in_hand(table.catalog, table.name(), location)
        if location is not None and metadata is not None:
            table.metadata, table.metadata_location = metadata, location
            return
    elif (fresh := _rest_table_in_hand(table.catalog, table.name())) is not None:
        table.metadata, table.metadata_location = fresh.metadata, fresh.metadata_location
        table.io, table.config = fresh.io, fresh.config  # as Table.refresh(): the load's own
        return
    table.refresh()
    remember(table)


def commit(
    table: Table, updates: tuple[TableUpdate, ...], requirements: tuple[TableRequirement, ...]
) -> None:
    """Commit prepared updates (:func:`icesink._pyiceberg.commit_table_updates`) and keep the result in hand.

    Raises:
        CommitFailedException: A requirement no longer holds (a concurrent commit).
    """
    rest = pyiceberg_rest.rest_catalog(table.catalog)
    if rest is None:
        commit_table_updates(table, updates, requirements)
    else:
        try:
            pyiceberg_rest.commit_table_updates(rest, table, updates, requirements)
        except CommitFailedException:
            forget(table)  # the next refresh loads in full, whatever was in hand
            raise
    remember(table)


def remember(table: Table) -> None:
    """Keep ``table``'s metadata in hand, with the file it was read from or written to."""
    with _lock:
        entries = _cache.setdefault(table.catalog, {})
        entries[tuple(table.name())] = (table.metadata_location, table.metadata)


def forget(table: Table) -> None:
    """Drop the metadata in hand of ``table``: it is loaded in full next time."""
    with _lock:
        _cache.get(table.catalog, {}).pop(tuple(table.name()), None)


def _rest_table_in_hand(catalog: Catalog, identifier: tuple[str, ...]) -> Table | None:
    """On a REST catalog, the table on the metadata in hand if the catalog still names its file."""
    rest = pyiceberg_rest.rest_catalog(catalog)
    with _lock:
        entry = _cache.get(catalog, {}).get(tuple(identifier))
    if rest is None or entry is None:
        return None
    return pyiceberg_rest.table_on(rest, tuple(identifier), entry[1], entry[0])


def _in_hand(catalog: Catalog, identifier: tuple[str, ...], location: str) -> TableMetadata | None:
    with _lock:
        entry = _cache.get(catalog, {}).get(tuple(identifier))
    return entry[1] if entry is not None and entry[0] == location else None
