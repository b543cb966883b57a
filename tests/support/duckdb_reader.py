"""Read an Iceberg table with DuckDB's iceberg extension, as another engine would.

The extensions come from the ``duckdb-extension-iceberg`` and ``duckdb-extension-avro``
packages (no download at run time): they are loaded from their files in site-packages.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import duckdb
import pyarrow as pa


def _extension_file(name: str) -> Path:
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package duckdb-extension-{name} is not installed (it is in the dev extra)")
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.glob(f"extensions/**/{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"no {name}.duckdb_extension under {root}")
    return found[0]


def duckdb_read(metadata_location: str, sql: str = "SELECT * FROM t") -> pa.Table:
    """Run ``sql`` over the table whose metadata JSON is ``metadata_location`` (as view ``t``)."""
    connection = duckdb.connect()
    try:
        connection.execute("SET autoinstall_known_extensions=false")
        connection.execute("SET autoload_known_extensions=false")
        for name in ("avro", "iceberg"):
            connection.execute(f"LOAD '{_extension_file(name)}'")
        path = metadata_location.removeprefix("file://")
        connection.execute(f"CREATE VIEW t AS SELECT * FROM iceberg_scan('{path}')")
        return connection.execute(sql).to_arrow_table()
    finally:
        connection.close()
