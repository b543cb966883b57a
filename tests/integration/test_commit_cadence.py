"""Commit cadence: small micro-batches staged durably and committed together, exactly once."""

from __future__ import annotations

import signal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from tests.integration.test_crash_recovery import job_arguments, job_result, parquet_files_on_disk, run_job
from tests.support.tables import catalog_from_options, summary_of

BATCHES = 20
ROWS = 500


def write_small_input(folder: Path) -> set[int]:
    folder.mkdir(parents=True)
    for n in range(BATCHES):
        ids = list(range(n * ROWS, (n + 1) * ROWS))
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([str(i) * 3 for i in ids])}),
            folder / f"part-{n:03d}.parquet",
        )
    return set(range(BATCHES * ROWS))


def cadence_options(catalog_options: dict[str, str]) -> dict[str, str]:
    # Each batch writes ~4 small files (a few KiB each): about 5 batches per commit.
    return {
        **catalog_options,
        "table": "db.cadence",
        "partition-by": "bucket(4, id)",
        "commit.target-bytes": "40000",
    }


def assert_each_batch_committed_once(options: dict[str, str], ids: set[int], warehouse: Path) -> None:
    table = catalog_from_options(options).load_table("db.cadence")
    read_ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(read_ids) == len(ids) and set(read_ids) == ids
    snapshots = table.snapshots()
    assert 2 <= len(snapshots) <= 8, [s.summary["icesink.batch-ids"] for s in snapshots if s.summary]
    covered: list[int] = []
    for s in snapshots:
        first, _, last = summary_of(s)["icesink.batch-ids"].partition("-")
        covered.extend(range(int(first), int(last or first) + 1))
    assert sorted(covered) == list(range(BATCHES))  # every batch in exactly one snapshot
    assert parquet_files_on_disk(warehouse) == {t.file.file_path for t in table.scan().plan_files()}


def test_twenty_small_batches_make_a_handful_of_snapshots(
    spark: SparkSession, tmp_path: Path, warehouse: Path, catalog_options: dict[str, str]
) -> None:
    ids = write_small_input(tmp_path / "input")
    options = cadence_options(catalog_options)
    sink = IcebergSink.from_options(options)
    source = str(tmp_path / "input")
    query = (
        spark.readStream.schema(spark.read.parquet(source).schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    assert query.exception() is None, query.exception()
    sink.flush()  # commit what the cadence left staged

    assert_each_batch_committed_once(options, ids, warehouse)
    samples = [s for metric in sink.metrics.registry.collect() for s in metric.samples]
    assert sum(s.value for s in samples if s.name == "icesink_rows_written_total") == len(ids)


def test_killed_after_staging_then_restarted_commits_each_batch_once(
    tmp_path: Path, warehouse: Path, catalog_options: dict[str, str]
) -> None:
    ids = write_small_input(tmp_path / "input")
    options = cadence_options(catalog_options)
    common = job_arguments(tmp_path / "input", tmp_path / "ck", options)
    killed = run_job(*common, "--crash-at", "after-stage", "--crash-batch", "7")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    table = catalog_from_options(options).load_table("db.cadence")
    committed_before = sum(t.file.record_count for t in table.scan().plan_files())
    assert committed_before < 8 * ROWS  # batch 7 (at least) is staged, not committed
    done = run_job(*common)
    assert done.returncode == 0, done.stderr[-3000:]

    assert_each_batch_committed_once(options, ids, warehouse)
    # The restarted run commits the staged batches it reloaded, and the rest.
    assert job_result(done)["icesink_rows_written_total"] == len(ids) - committed_before


def test_staged_batches_are_visible_after_flush(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.flush", "sink-id": "flush", "commit.max-batches": "10"}
    sink = IcebergSink.from_options(options)
    for batch_id in range(3):
        sink(spark.range(batch_id * 10, batch_id * 10 + 10).select("id", F.lit("x").alias("v")), batch_id)
    table = sink.catalog.load_table("db.flush")
    assert table.current_snapshot() is None  # staged, durable, not yet visible
    sink(spark.range(0, 10).select("id", F.lit("x").alias("v")), 1)  # replay of a staged batch: skipped
    sink.flush()
    table = sink.catalog.load_table("db.flush")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(30))
    assert [s.summary["icesink.batch-ids"] for s in table.snapshots() if s.summary] == ["0-2"]


def test_empty_batch_is_a_chunk_boundary(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.boundary", "sink-id": "boundary", "commit.interval-s": "3600"}
    sink = IcebergSink.from_options(options)
    sink(spark.range(0, 10), 0)
    sink(spark.range(10, 20), 1)
    assert sink.catalog.load_table("db.boundary").current_snapshot() is None
    sink(spark.range(0, 0), 2)
    table = sink.catalog.load_table("db.boundary")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(20))
    assert table.properties["icesink.sink.boundary.last-batch-id"] == "2"
