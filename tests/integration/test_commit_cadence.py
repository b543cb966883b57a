"""Commit cadence: small micro-batches staged durably and committed together, exactly once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.integration.test_crash_recovery import parquet_files_on_disk
from tests.support.parquet_streams import stream_parquet_folder
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
        "maintenance.enabled": "false",  # every snapshot a commit of batches: no compaction's among them
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
    stream_parquet_folder(spark, source, sink, tmp_path / "ck", files_per_trigger=1)
    sink.flush()  # commit what the cadence left staged

    assert_each_batch_committed_once(options, ids, warehouse)
    samples = [s for metric in sink.metrics.registry.collect() for s in metric.samples]
    assert sum(s.value for s in samples if s.name == "icesink_rows_written_total") == len(ids)
