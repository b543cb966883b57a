"""Two drivers, each with its own streaming query, share one table of a PostgreSQL SQL catalog."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import load_catalog

from tests.support.postgres import PostgresServer
from tests.support.processes import spawn_evolving_writer
from tests.support.tables import row_multiset, table_rows

pytestmark = pytest.mark.deploy

WRITERS = ("a", "b")
FILES = 3
ROWS_PER_FILE = 40


def write_input(folder: Path, writer: str, offset: int) -> list[dict[str, Any]]:
    """``FILES`` Parquet files of ``id``, ``writer`` and a column of this writer's own."""
    folder.mkdir(parents=True)
    rows: list[dict[str, Any]] = []
    for n in range(FILES):
        ids = list(range(offset + n * ROWS_PER_FILE, offset + (n + 1) * ROWS_PER_FILE))
        batch = [{"id": i, "writer": writer, f"{writer}_value": i * 2} for i in ids]
        schema = pa.schema([("id", pa.int64()), ("writer", pa.string()), (f"{writer}_value", pa.int64())])
        pq.write_table(pa.Table.from_pylist(batch, schema), folder / f"part-{n}.parquet")
        rows += batch
    return rows


def test_two_processes_append_and_evolve_one_table_at_once(postgres: PostgresServer, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    properties = {"type": "sql", "uri": postgres.sqlalchemy_uri(), "warehouse": f"file://{warehouse}"}
    table_name = f"shared.evolving_{tmp_path.name[-12:].replace('-', '_')}"
    options = {
        "table": table_name,
        "catalog.name": "shared",
        **{f"catalog.{k}": v for k, v in properties.items()},
        "commit.retry.num-retries": "20",
    }
    expected = {w: write_input(tmp_path / "in" / w, w, n * 100_000) for n, w in enumerate(WRITERS)}
    go = tmp_path / "go"
    processes = [spawn_evolving_writer(tmp_path, w, options, go) for w in WRITERS]
    try:
        deadline = time.monotonic() + 300
        while not all((tmp_path / f"{w}.ready").exists() for w in WRITERS):
            assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
            time.sleep(0.05)
        go.touch()  # both first batches evolve the table at the same moment
        outputs = [p.communicate(timeout=600) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
    for p, (_, stderr) in zip(processes, outputs, strict=True):
        assert p.returncode == 0, stderr[-4000:]

    table = load_catalog("shared", **properties).load_table(table_name)
    names = [f.name for f in table.schema().fields]
    assert sorted(names) == ["a_value", "b_value", "id", "writer"]
    want = [{**{f"{w}_value": None for w in WRITERS}, **row} for w in WRITERS for row in expected[w]]
    assert row_multiset(table_rows(table)) == row_multiset(want)
    assert len(table.snapshots()) == FILES * len(WRITERS)
    on_disk = {str(p) for p in warehouse.rglob("*.parquet")}
    assert on_disk == {urlparse(t.file.file_path).path for t in table.scan().plan_files()}
