"""Several streaming queries and processes write one table at once: every row exactly once."""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path

from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.integration.test_crash_recovery import job_result, run_job, write_input
from tests.support.tables import catalog_from_options


def test_two_queries_in_one_process(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.shared", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    expected: set[int] = set()
    queries = []
    for q in range(2):
        source = tmp_path / f"in{q}"
        expected |= write_input(source, files=3, offset=q * 100_000)
        schema = spark.read.parquet(str(source)).schema
        queries.append(
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / f"ck{q}"))
            .trigger(availableNow=True)
            .start()
        )
    for query in queries:
        query.awaitTermination(600)
        assert query.exception() is None
    table = sink.catalog.load_table("db.shared")
    ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(ids) == len(expected) and set(ids) == expected
    sink_ids = {s.summary["icesink.sink-id"] for s in table.snapshots() if s.summary is not None}
    assert sink_ids == {str(q.id) for q in queries}
    assert len(table.snapshots()) == 6


def test_two_processes(tmp_path: Path, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.procs", "partition-by": "bucket(4, id)"}
    expected: set[int] = set()
    jobs = []
    for p in range(2):
        expected |= write_input(tmp_path / f"in{p}", files=3, offset=p * 100_000)
        jobs.append(
            [
                "--input",
                str(tmp_path / f"in{p}"),
                "--checkpoint",
                str(tmp_path / f"ck{p}"),
                "--options",
                json.dumps(options),
            ]
        )
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        results = list(pool.map(lambda args: run_job(*args), jobs))
    for proc in results:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert job_result(proc)["icesink_rows_written_total"] == 6000
    table = catalog_from_options(options).load_table("db.procs")
    ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(ids) == len(expected) and set(ids) == expected
    assert len(table.snapshots()) == 6
