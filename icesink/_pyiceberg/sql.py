"""The SQL catalog's table row: the current metadata location in one query, a commit by compare-and-swap.

``SqlCatalog.commit_table`` loads the table's metadata again and goes through an ORM
session per statement; a streaming sink commits on metadata it already holds. The
statements here are SQLAlchemy Core statements on pyiceberg's table of tables.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, cast

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.update import TableRequirement, TableUpdate
from sqlalchemy import bindparam, select, update

from icesink._pyiceberg import updated_metadata


def sql_catalog(catalog: Catalog) -> SqlCatalog | None:
    """``catalog`` when it is a SQL catalog whose database reports updated rows (compare-and-swap)."""
    if isinstance(catalog, SqlCatalog) and catalog.engine.dialect.supports_sane_rowcount:
        return catalog
    return None


def _tables() -> Any:
    """The catalog's table of tables, for SQLAlchemy Core statements (no ORM session per statement)."""
    return IcebergTables.__table__


@functools.cache
def _location_query() -> Any:
    """The current metadata location of one table, by its bound row key.

    Built once: building a statement costs more than running it.
    """
    columns = _tables().c
    return select(columns.metadata_location).where(*_row_key(columns))


@functools.cache
def _swap_statement() -> Any:
    """The compare-and-swap of one table's metadata location, by its bound row key and the base location."""
    rows = _tables()
    return (
        update(rows)
        .where(*_row_key(rows.c), rows.c.metadata_location == bindparam("base_location"))
        .values(
            metadata_location=bindparam("location"), previous_metadata_location=bindparam("base_location")
        )
    )


def _row_key(columns: Any) -> list[Any]:
    return [
        columns.catalog_name == bindparam("row_catalog"),
        columns.table_namespace == bindparam("row_namespace"),
        columns.table_name == bindparam("row_name"),
    ]


def _row_of(catalog: SqlCatalog, identifier: tuple[str, ...]) -> dict[str, str]:
    """The bound values selecting the catalog row of the table ``identifier``."""
    return {
        "row_catalog": catalog.name,
        "row_namespace": Catalog.namespace_to_string(Catalog.namespace_from(identifier)),
        "row_name": Catalog.table_name_from(identifier),
    }


def sql_metadata_location(catalog: SqlCatalog, identifier: tuple[str, ...]) -> str | None:
    """The current metadata location of the table ``identifier`` (``None``: no such table).

    One indexed query, where loading the table parses its whole metadata file.
    """
    with catalog.engine.connect() as connection:
        found = connection.execute(_location_query(), _row_of(catalog, identifier)).scalar_one_or_none()
        return cast("str | None", found)


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
    values = {**_row_of(catalog, table.name()), "base_location": base_location, "location": location}
    with catalog.engine.begin() as connection:
        swapped = connection.execute(_swap_statement(), values).rowcount
    if swapped < 1:
        with contextlib.suppress(OSError):
            io.delete(location)  # no catalog row names it
        raise CommitFailedException(f"Table has been updated by another process: {'.'.join(table.name())}")
    return CommitTableResponse(metadata=metadata, metadata_location=location)
