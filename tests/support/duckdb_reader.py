"""DuckDB as a second, independent reader of Iceberg tables.

The extensions come from PyPI (``duckdb-extension-iceberg``, ``-avro``, ``-httpfs``, at
the version of ``duckdb``) and are loaded from site-packages: DuckDB is told not to
download or auto-load anything, so a missing extension fails loudly instead of reaching
for the network.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa


@dataclass(frozen=True)
class S3Settings:
    """Where and how DuckDB reaches an S3 API (path-style, plain HTTP on loopback)."""

    endpoint: str
    """``http://host:port``."""
    access_key: str
    secret_key: str
    region: str = "us-east-1"


def extension_path(name: str) -> Path:
    """The ``<name>.duckdb_extension`` file of the PyPI package ``duckdb-extension-<name>``."""
    spec = importlib.util.find_spec(f"duckdb_extension_{name}")
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the duckdb-extension-{name} package is not installed (pip install -e '.[dev]')")
    found = sorted(Path(spec.origin).parent.glob(f"extensions/**/{name}.duckdb_extension"))
    if not found:
        raise RuntimeError(f"duckdb-extension-{name} ships no {name}.duckdb_extension")
    return found[-1]


def connect(s3: S3Settings | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the iceberg and avro extensions (and httpfs with ``s3``) loaded."""
    con = duckdb.connect(":memory:")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    names = ["avro", "iceberg"] + (["httpfs"] if s3 is not None else [])
    for name in names:
        con.execute(f"LOAD '{extension_path(name)}'")
    if s3 is not None:
        host = s3.endpoint.split("://", 1)[-1]
        con.execute(
            "CREATE SECRET icesink_s3 (TYPE s3, KEY_ID ?, SECRET ?, REGION ?, ENDPOINT ?,"
            " URL_STYLE 'path', USE_SSL ?)",
            [s3.access_key, s3.secret_key, s3.region, host, s3.endpoint.startswith("https://")],
        )
    return con


def read_iceberg_with_duckdb(metadata_location: str, s3: S3Settings | None = None) -> pa.Table:
    """All rows of the Iceberg table whose current metadata file is ``metadata_location``.

    Args:
        metadata_location: A ``*.metadata.json`` path or URI (``file://``, ``s3://``).
        s3: How to reach S3, for ``s3://`` locations.
    """
    location = metadata_location.removeprefix("file://")
    con = connect(s3)
    try:
        return con.execute("SELECT * FROM iceberg_scan(?)", [location]).fetch_arrow_table()
    finally:
        con.close()


def duckdb_read(
    metadata_location: str, sql: str = "SELECT * FROM t", s3: S3Settings | None = None
) -> pa.Table:
    """Run ``sql`` over the table whose metadata JSON is ``metadata_location`` (as the view ``t``)."""
    location = metadata_location.removeprefix("file://")
    con = connect(s3)
    try:
        quoted = location.replace("'", "''")  # a view cannot take a prepared parameter
        con.execute(f"CREATE VIEW t AS SELECT * FROM iceberg_scan('{quoted}')")
        return con.execute(sql).fetch_arrow_table()
    finally:
        con.close()
