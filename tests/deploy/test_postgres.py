"""PostgreSQL as a SQL catalog shared by several writer processes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.support.postgres import PostgresServer
from tests.support.scripts import script_result, start_script

pytestmark = pytest.mark.deploy

SUPPORT = Path(__file__).resolve().parents[1] / "support"
APPENDS_PER_WRITER = 4
ROWS_PER_APPEND = 50


def test_two_processes_append_to_one_table(postgres: PostgresServer, tmp_path: Path) -> None:
    properties = {
        "type": "sql",
        "uri": postgres.sqlalchemy_uri(),
        "warehouse": f"file://{tmp_path / 'warehouse'}",
    }
    catalog = load_catalog("shared", **properties)
    catalog.create_namespace_if_not_exists("shared")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "writer", StringType(), required=False),
    )
    table = catalog.create_table(
        f"shared.appends_{tmp_path.name}", schema, properties={"commit.retry.num-retries": "20"}
    )
    plans = {
        writer: [
            list(range(start, start + ROWS_PER_APPEND))
            for start in range(offset, offset + 2 * APPENDS_PER_WRITER * ROWS_PER_APPEND, 2 * ROWS_PER_APPEND)
        ]
        for writer, offset in (("a", 0), ("b", ROWS_PER_APPEND))
    }

    writers = [
        start_script(
            SUPPORT / "catalog_append_job.py",
            {"catalog": properties, "table": ".".join(table.name()), "writer": writer, "ids": ids},
        )
        for writer, ids in plans.items()
    ]
    results = [script_result(w) for w in writers]

    reloaded = catalog.load_table(table.name())
    back = reloaded.scan().to_arrow().sort_by("id")
    expected_ids = sorted(i for ids in plans.values() for chunk in ids for i in chunk)
    assert back.column("id").to_pylist() == expected_ids
    assert back.group_by("writer").aggregate([("id", "count")]).sort_by("writer").to_pydict() == {
        "writer": ["a", "b"],
        "id_count": [APPENDS_PER_WRITER * ROWS_PER_APPEND] * 2,
    }
    committed = {s for r in results for s in r["snapshots"]}
    assert committed == {s.snapshot_id for s in reloaded.snapshots()}
    assert len(committed) == 2 * APPENDS_PER_WRITER


def test_catalog_rows_live_in_postgres(postgres: PostgresServer, tmp_path: Path) -> None:
    import sqlalchemy

    catalog = load_catalog(
        "pg", type="sql", uri=postgres.sqlalchemy_uri(), warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    catalog.create_namespace_if_not_exists("visible")
    table = catalog.create_table(f"visible.t_{tmp_path.name}", pa.schema([("id", pa.int64())]))

    engine = sqlalchemy.create_engine(postgres.sqlalchemy_uri())
    try:
        with engine.connect() as connection:
            stored = connection.execute(
                sqlalchemy.text(
                    "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'visible'"
                    " AND table_name = :name"
                ),
                {"name": table.name()[-1]},
            ).scalar_one()
    finally:
        engine.dispose()
    assert stored == table.metadata_location
