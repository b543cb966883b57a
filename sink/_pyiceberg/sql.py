"""The SQL catalog's table row: the current metadata location in one query, a commit by compare-and-swap.

``SqlCatalog.commit_table`` loads the table's metadata again and goes through an ORM
session per statement; a streaming sink commits on metadata it already holds. The
statements here are SQLAlchemy Core statements on pyiceberg's table of tables.
"""

from __future__ import annotations

import contextlib
from typing import Any, cast

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.update import TableRequirement, TableUpdate
from sqlalchemy import select, update

from sink._pyiceberg import updated_metadata


def sql_catalog(catalog: Catalog) -> SqlCatalog | None:
    """``catalog`` when it is a SQL catalog whose database reports updated rows (compare-and-swap)."""
    if isinstance(catalog, SqlCatalog) and catalog.engine.dialect.supports_sane_rowcount:
        return catalog
    return None


def _tables() -> Any:
    """The catalog's table of tables, for SQLAlchemy Core statements (no ORM session per statement)."""
    return IcebergTables.__table__


def _table_row(catalog: SqlCatalog, identifier: tuple[str, ...]) -> list[Any]:
    """The conditions selecting the catalog row of the table ``identifier``."""
    columns = _tables().c
    return [
        columns.catalog_name == catalog.name,
        columns.table_namespace == Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
        columns.table_name == Catalog.table_name_from(identifier),
    ]


def sql_metadata_location(catalog: SqlCatalog, identifier: tuple[str, ...]) -> str | None:
    """The current metadata location of the table ``identifier`` (``None``: no such table).

    One indexed query, where loading the table parses its whole metadata file.
    """
    query = select(_tables().c.metadata_location).where(*_table_row(catalog, identifier))
    with catalog.engine.connect() as connection:
        return cast("str | None", connection.execute(query).scalar_one_or_none())


def sql_commit_table(
    table: Table, requirements: tuple[TableRequirement, ...], updates: tuple[TableUpdate, ...]
) -> CommitTableResponse:
    """What ``SqlCatalog.commit_table`` does, on the table's metadata instead of the catalog's reloaded copy.

    The requirements are checked against the table's metadata, the new metadata file
    (next version number, new uuid, the table's location provider) is written, and the
    catalog row moves to it only if it still names the table's metadata file: a
    concurrent commit makes the swap fail, and the caller refreshes and retries.

    Raises:
        CommitFailedException: A requirement does not hold, or the table moved meanwhile.
    """
    catalog = sql_catalog(table.catalog)
    assert catalog is not None
    base, base_location = table.metadata, table.metadata_location
    for requirement in requirements:
        requirement.validate(base)
    metadata = updated_metadata(base, updates, base_location)
    if metadata is base:
        return CommitTableResponse(metadata=base, metadata_location=base_location)
    version = catalog._parse_metadata_version(base_location) + 1
    location = load_location_provider(
        metadata.location, metadata.properties
    ).new_table_metadata_file_location(version)
    io = table.io  # a FileIO per commit would set up its file systems each time
    catalog._write_metadata(metadata=metadata, io=io, metadata_path=location)
    rows = _tables()
    swap = (
        update(rows)
        .where(*_table_row(catalog, table.name()), rows.c.metadata_location == base_location)
        .values(metadata_location=location, previous_metadata_location=base_location)
    )
    with catalog.engine.begin() as connection:
        swapped = connection.execute(swap).rowcount
    if swapped < 1:
        with contextlib.suppress(OSError):
            io.delete(location)  # no catalog row names it
        raise CommitFailedException(f"Table has been updated by another process: {'.'.join(table.name())}")
    return CommitTableResponse(metadata=metadata, metadata_location=location)
