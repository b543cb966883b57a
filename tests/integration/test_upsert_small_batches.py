"""Small upsert batches at Spark's default shuffle partitions (200): a lookup sized by its work.

Every batch adds at most one position delete file per partition it touches, whether its
lookup runs in the driver's process (a small plan) or as a Spark job, no stage of its jobs
runs a task per shuffle partition, and readers see the last change of every key.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pyiceberg.manifest import DataFileContent, ManifestEntryStatus
from pyiceberg.table import Table

from icesink import IcebergSink
from tests.integration.test_upsert_sink import upsert_options
from tests.support.duckdb_reader import duckdb_read
from tests.support.spark_jobs import stage_tasks
from tests.support.upserts import changes, expected_state, rows_of

LOADS = 2  # insert batches of 100 keys: each adds a data file to every one of the 4 buckets


@pytest.fixture()
def default_shuffle(spark: Any) -> Iterator[Any]:
    """The shared session at Spark's default of 200 shuffle partitions for one test."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    yield spark
    spark.conf.set("spark.sql.shuffle.partitions", before)


def delete_files_per_partition(table: Table) -> list[Counter[Any]]:
    """For every snapshot, oldest first: the position delete files it added, counted by partition."""
    added: list[Counter[Any]] = []
    for snapshot in table.snapshots():
        counts: Counter[Any] = Counter()
        for manifest in snapshot.manifests(table.io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
                deletes = entry.data_file.content == DataFileContent.POSITION_DELETES
                if deletes and entry.status == ManifestEntryStatus.ADDED:
                    partition = entry.data_file.partition
                    counts[tuple(partition[i] for i in range(len(partition)))] += 1
        added.append(counts)
    return added


@pytest.mark.parametrize("driver_max_files", ["0", "32"], ids=["spark-job", "in-the-driver"])
def test_a_small_batch_adds_one_delete_file_per_partition_at_200_shuffle_partitions(
    default_shuffle: Any, catalog_options: dict[str, str], driver_max_files: str
) -> None:
    spark = default_shuffle
    options = upsert_options(catalog_options, **{"upsert.lookup-driver-max-files": driver_max_files})
    sink = IcebergSink.from_options(options)
    batches = [
        changes(*[(i, f"n{i}", i, "c", 0) for i in range(s, s + 100)]) for s in range(0, LOADS * 100, 100)
    ]
    # Every data file of every bucket holds keys this changes: LOADS files a bucket to look in.
    batches.append(
        changes(
            *[(i, f"u{i}", -i, "u", 1) for i in range(0, 200, 3)],
            *[(i, None, None, "d", 1) for i in range(1, 200, 7)],
            (8, "back", 8, "c", 2),
        )
    )
    state: dict[int, tuple[str | None, int | None]] = {}
    for batch_id, batch in enumerate(batches):
        sink(spark.createDataFrame(batch), batch_id)
        expected_state(state, batch)

    table = sink.catalog.load_table("db.items")
    per_snapshot = delete_files_per_partition(table)
    assert len(per_snapshot) == len(batches)
    assert sum(per_snapshot[LOADS].values()) == 4  # every bucket, once
    assert all(n == 1 for c in per_snapshot for n in c.values()), per_snapshot
    for snapshot in table.snapshots()[LOADS:]:
        assert snapshot.summary is not None and snapshot.summary["added-delete-files"] == "4"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "200"  # the sink changed no setting
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    assert 1 not in state and state[8] == ("back", 8) and state[3] == ("u3", -3)


def test_an_upsert_batch_runs_no_stage_of_the_default_shuffle_partitions(
    default_shuffle: Any, catalog_options: dict[str, str]
) -> None:
    # The last change per key is cached for the write and the deletes' keys: a stage of 200
    # tasks there (a second shuffle of the changes, which Spark planned for a cached batch whose
    # one destination is a literal) would run again in every job reading them.
    spark = default_shuffle
    sink = IcebergSink.from_options(upsert_options(catalog_options))
    batches = [
        changes(*[(i, f"n{i}", i, "c", 0) for i in range(300)]),
        changes(
            *[(i, f"u{i}", -i, "u", 1) for i in range(0, 300, 3)],
            *[(i, None, None, "d", 1) for i in range(1, 300, 7)],
            (8, "back", 8, "c", 2),
            (400, "new", 400, "c", 1),
        ),
    ]
    state: dict[int, tuple[str | None, int | None]] = {}
    tasks = []
    for batch_id, batch in enumerate(batches):
        batch_df = spark.createDataFrame(batch).persist()  # as a user's foreachBatch may hand it over
        tasks.append(stage_tasks(spark, functools.partial(sink, batch_df, batch_id)))
        batch_df.unpersist()
        expected_state(state, batch)

    print(f"tasks of each stage, per batch: {tasks}")
    assert all(tasks) and max(max(t) for t in tasks) <= 16, tasks
    table = sink.catalog.load_table("db.items")
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    assert 1 not in state and state[8] == ("back", 8) and state[400] == ("new", 400)
