"""The sink as the ``foreachBatch`` function of a Spark Connect client's streaming query."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.support.spark_connect import SparkConnectServer
from tests.support.spark_process import run_driver
from tests.support.tables import catalog_from_options, row_multiset, table_rows

pytestmark = pytest.mark.deploy

JOB = Path(__file__).resolve().parents[1] / "support" / "connect_sink_job.py"
FILES = 3
ROWS_PER_FILE = 40


def write_input(folder: Path) -> list[dict[str, object]]:
    folder.mkdir()
    expected: list[dict[str, object]] = []
    for f in range(FILES):
        lines = [
            {"id": f * ROWS_PER_FILE + i, "name": f"n{f}-{i}", "region": f"r{i % 3}"}
            for i in range(ROWS_PER_FILE)
        ]
        (folder / f"part-{f}.json").write_text("\n".join(json.dumps(line) for line in lines))
        expected += lines
    return expected


def sink_options(tmp_path: Path, **more: str) -> dict[str, str]:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    return {
        "table": "db.events",
        "catalog.name": "default",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.warehouse": f"file://{warehouse}",
        "partition-by": "region,bucket(4, id)",
        **more,
    }


def run_query(server: SparkConnectServer, tmp_path: Path, options: dict[str, str], run: str) -> str | None:
    result = run_driver(
        JOB,
        {
            "remote": server.remote,
            "input": str(tmp_path / "input"),
            "checkpoint": str(tmp_path / f"checkpoint-{run}"),
            "options": options,
        },
        tmp_path / f"client-{run}",
    )
    error: str | None = result["error"]
    return error


def test_connect_query_writes_every_row_once_and_skips_replayed_batches(
    spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    expected = write_input(tmp_path / "input")
    options = sink_options(tmp_path, **{"sink-id": "connect-ingest"})

    assert run_query(spark_connect, tmp_path, options, "first") is None
    table = catalog_from_options(options).load_table("db.events")
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    snapshots = [s.snapshot_id for s in table.snapshots()]
    assert len(snapshots) == FILES  # one commit per batch, each file one batch
    assert all(f.file_path.endswith(".parquet") for f in (t.file for t in table.scan().plan_files()))

    # A new checkpoint with the same sink id replays batches 0..2: all are skipped.
    assert run_query(spark_connect, tmp_path, options, "replay") is None
    table = catalog_from_options(options).load_table("db.events")
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    assert [s.snapshot_id for s in table.snapshots()] == snapshots
    on_disk = {str(p) for p in (tmp_path / "warehouse").rglob("*.parquet")}
    referenced = {urlparse(t.file.file_path).path for t in table.scan().plan_files()}
    assert on_disk == referenced  # nothing unreferenced


def test_connect_query_without_sink_id_fails_naming_the_option(
    spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    write_input(tmp_path / "input")
    options = sink_options(tmp_path)

    error = run_query(spark_connect, tmp_path, options, "no-sink-id")

    assert error is not None
    assert "'sink-id'" in error
    assert "Spark Connect" in error


def test_sink_pickles_to_its_configuration_and_writes_after_unpickling(
    spark: SparkSession, tmp_path: Path
) -> None:
    options = sink_options(tmp_path, **{"sink-id": "pickled"})
    sink = IcebergSink.from_options(options)

    copy = pickle.loads(pickle.dumps(sink))
    rows = [{"id": i, "name": f"n{i}", "region": f"r{i % 3}"} for i in range(30)]
    copy(spark.createDataFrame(rows, "id long, name string, region string"), 0)

    assert copy.config == sink.config
    assert copy.catalog is not sink.catalog and copy.metrics is not sink.metrics
    table = catalog_from_options(options).load_table("db.events")
    assert row_multiset(table_rows(table)) == row_multiset(rows)
