"""An appended stream's small files compacted by size class: each row rewritten a few times.

A stream of many small batches through the sink, its maintenance on with the default
``maintenance.compact.min-small-files`` (8), a file a batch in each of 2 partitions. The table
is read back: every row once, the data files of each partition after every batch, the bytes the
``replace`` snapshots added against the bytes appended, and how many compactions wrote each row
(the files each ``replace`` snapshot added, read back).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink import IcebergSink

BATCHES = 48
ROWS_PER_BATCH = 320
FAN_IN = 8  # maintenance.compact.min-small-files' default


def _batch(spark: SparkSession, n: int) -> Any:
    rows = [
        {"id": n * 10_000 + i, "part": i % 2, "payload": f"{(n * 10_000 + i) * 2654435761 % 2**64:032x}" * 4}
        for i in range(ROWS_PER_BATCH)
    ]
    return spark.createDataFrame(rows, "id long, part int, payload string")


def _files_per_partition(table: Table) -> Counter[int]:
    return Counter(task.file.partition[0] for task in table.scan().plan_files())


def _bytes_by_operation(table: Table) -> Counter[str]:
    totals: Counter[str] = Counter()
    for snapshot in table.snapshots():
        assert snapshot.summary is not None
        totals[snapshot.summary.operation.value] += int(snapshot.summary.get("added-files-size") or 0)
    return totals


def _writes_per_row(table: Table) -> Counter[int]:
    """How many ``replace`` snapshots wrote each row: the ids in the data files each added."""
    writes: Counter[int] = Counter()
    for snapshot in table.snapshots():
        assert snapshot.summary is not None
        if snapshot.summary.operation.value != "replace":
            continue
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                if entry.status == ManifestEntryStatus.ADDED and entry.snapshot_id == snapshot.snapshot_id:
                    path = entry.data_file.file_path.removeprefix("file://")
                    writes.update(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    return writes


def test_a_long_appended_stream_rewrites_each_row_a_logarithmic_number_of_times(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {
        **catalog_options,
        "table": "db.events",
        "sink-id": "s1",
        "partition-by": "part",
        "maintenance.expire.min-snapshots-to-keep": "1000",  # every replace snapshot kept, to read back
    }
    sink = IcebergSink.from_options(options)
    most: list[int] = []
    for batch_id in range(BATCHES):
        sink(_batch(spark, batch_id), batch_id)
        most.append(max(_files_per_partition(sink.catalog.load_table("db.events")).values()))
    sink.close()

    table = sink.catalog.load_table("db.events")
    ids = sorted(r["id"] for r in table.scan(selected_fields=("id",)).to_arrow().to_pylist())
    assert ids == [n * 10_000 + i for n in range(BATCHES) for i in range(ROWS_PER_BATCH)]  # exactly once

    # About 50 files of a few KB in each partition: in classes of 8 a row climbs a class per
    # rewrite, log8(50) = 1.9 of them (one more where compression keeps a merged file in its
    # class); merging each compaction's file again with the next 8 small ones doubles it each
    # time instead: log2(50 / 8) + 1 = 3.6 rewrites of the first rows.
    appended = sum(
        int(s.summary.get("added-data-files") or 0)
        for s in table.snapshots()
        if s.summary is not None and s.summary.operation.value == "append"
    )
    classes = math.ceil(math.log(appended / 2, FAN_IN))
    rewrites = Counter(_writes_per_row(table).values())
    by_operation = _bytes_by_operation(table)
    figures = f"rows by rewrites {rewrites}, bytes {by_operation}, files after each batch {most}"
    assert max(rewrites) <= classes + 1, figures
    assert sum(n * rows for n, rows in rewrites.items()) <= classes * len(ids), figures  # rows rewritten
    assert by_operation["replace"] <= (classes + 1) * by_operation["append"], figures
    # Between compactions a partition holds fewer than 8 files of each class, and the files of the
    # batches until the next plan (8 more data files in the table).
    assert max(most) <= (FAN_IN - 1) * classes + FAN_IN, figures
