"""Maintenance inside the stream: after its commits the sink compacts, expires and stays exactly once.

Small thresholds make a few batches enough; each test reads the tables back (pyiceberg and
DuckDB, delete files, snapshots, the replay check) and the sink's metrics.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink import IcebergSink, failpoints
from tests.integration.test_upsert_sink import assert_reads, upsert_options
from tests.support.tables import catalog_from_options, table_rows
from tests.support.upserts import State, changes, expected_state


def _updates(n: int) -> pa.Table:
    """Batch ``n``: inserts of 20 keys (n == 0), else an update of every key: a delete file per bucket."""
    return changes(*[(i, f"v{n}-{i}", n, "c" if n == 0 else "u", n) for i in range(20)])


def _delete_files(table: Table) -> int:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return sum(
        e.data_file.content != DataFileContent.DATA
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
    )


def _sample(sink: IcebergSink, name: str, **labels: str) -> float:
    return sink.metrics.registry.get_sample_value(name, labels) or 0.0


def _delete_files_per_partition(table: Table) -> dict[int, int]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    counts: dict[int, int] = {}
    for m in snapshot.manifests(table.io):
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True):
            if e.data_file.content != DataFileContent.DATA:
                counts[e.data_file.partition[0]] = counts.get(e.data_file.partition[0], 0) + 1
    return counts


def test_a_long_upsert_stream_keeps_its_delete_files_merged(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = upsert_options(
        catalog_options,
        **{
            "maintenance.compact.max-delete-files": "2",
            "maintenance.compact.min-small-files": "3",
            "maintenance.compact.partitions-per-batch": "1",
        },
    )
    sink = IcebergSink.from_options(options)
    state: State = {}
    most = []
    for batch_id in range(12):  # every other key changes: files keep most of their rows
        batch = changes(
            *[
                (i, f"v{batch_id}-{i}", batch_id, "c" if batch_id == 0 else "u", batch_id)
                for i in range(batch_id % 2, 40, 2)
            ]
        )
        sink(spark.createDataFrame(batch), batch_id)
        expected_state(state, batch)
        most.append(max(_delete_files_per_partition(sink.catalog.load_table("db.items")).values(), default=0))

    table = sink.catalog.load_table("db.items")
    assert_reads(table, state)
    assert max(most) <= 2, most
    assert _sample(sink, "icesink_maintenance_partitions_total", table="db.items", kind="merged") > 0
    assert _sample(sink, "icesink_maintenance_files_total", table="db.items", action="delete_merged") > 0
    assert _sample(sink, "icesink_maintenance_partitions_total", table="db.items", kind="compacted") > 0


def test_an_upsert_stream_is_compacted_in_stream_and_replays_stay_skipped(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = upsert_options(
        catalog_options,
        **{
            "maintenance.compact.min-delete-files": "2",
            "maintenance.compact.partitions-per-batch": "4",
            "maintenance.expire.max-snapshot-age-s": "0",
            "maintenance.expire.min-snapshots-to-keep": "2",
        },
    )
    sink = IcebergSink.from_options(options)
    state: State = {}
    deletes = []
    for batch_id in range(4):
        sink(spark.createDataFrame(_updates(batch_id)), batch_id)
        expected_state(state, _updates(batch_id))
        deletes.append(_delete_files(sink.catalog.load_table("db.items")))

    table = sink.catalog.load_table("db.items")
    assert_reads(table, state)  # every file on disk referenced: compaction and expiry left none behind
    assert deletes == [0, 4, 0, 4]  # batch 2 made two delete files per bucket: compacted at once
    assert len(table.snapshots()) == 2
    summaries = [s.summary for s in table.snapshots() if s.summary is not None]
    assert any(s.operation.value == "replace" for s in summaries) or deletes[-1] == 0
    assert _sample(sink, "icesink_maintenance_files_total", table="db.items", action="delete_removed") >= 4
    assert _sample(sink, "icesink_snapshots_expired_total", table="db.items") > 0
    assert _sample(sink, "icesink_live_delete_files", table="db.items") == deletes[-1]

    # A replay of a batch whose snapshot expired long ago is still recognised and skipped.
    snapshot_id = table.metadata.current_snapshot_id
    sink(spark.createDataFrame(_updates(1)), 1)
    table.refresh()
    assert table.metadata.current_snapshot_id == snapshot_id
    assert_reads(table, state)
    assert _sample(sink, "icesink_replays_skipped_total", table="db.items", sink_id="s1") == 1


def test_maintenance_enabled_false_does_nothing(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = upsert_options(
        catalog_options,
        **{
            "maintenance.enabled": "false",
            "maintenance.compact.min-delete-files": "1",
            "maintenance.expire.max-snapshot-age-s": "0",
            "maintenance.expire.min-snapshots-to-keep": "1",
        },
    )
    sink = IcebergSink.from_options(options)
    state: State = {}
    for batch_id in range(2):
        sink(spark.createDataFrame(_updates(batch_id)), batch_id)
        expected_state(state, _updates(batch_id))

    table = sink.catalog.load_table("db.items")
    assert table.metadata.properties["icesink.maintenance.enabled"] == "true"  # the option wins
    assert len(table.snapshots()) == 2
    assert _delete_files(table) == 4
    assert all(s.summary is None or s.summary.operation.value != "replace" for s in table.snapshots())
    assert _sample(sink, "icesink_maintenance_runs_total", table="db.items", outcome="done") == 0
    assert_reads(table, state)


def test_routed_tables_are_each_maintained(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {
        **catalog_options,
        "sink-id": "routed",
        "route.by": "field",
        "route.field": "kind",
        "route.table-template": "ev.{value}",
        "maintenance.compact.min-small-files": "3",
        "maintenance.expire.max-snapshot-age-s": "0",
        "maintenance.expire.min-snapshots-to-keep": "1",
    }
    sink = IcebergSink.from_options(options)
    kinds = ("a", "b")
    for batch_id in range(4):
        rows = [{"id": batch_id * 10 + i, "kind": kinds[i % 2]} for i in range(10)]
        sink(spark.createDataFrame(rows, "id long, kind string"), batch_id)
    sink.close()

    catalog = catalog_from_options(catalog_options)
    for n, kind in enumerate(kinds):
        table = catalog.load_table(f"ev.{kind}")
        ids = sorted(r["id"] for r in table_rows(table))
        assert ids == [b * 10 + i for b in range(4) for i in range(n, 10, 2)]  # exactly once
        files = list(table.scan().plan_files())
        assert len(files) < 3  # the small files of three batches compacted into one
        assert len(table.snapshots()) <= 2  # expired before the last compaction
        compacted = _sample(sink, "icesink_maintenance_files_total", table=f"ev.{kind}", action="rewritten")
        assert compacted >= 3
    again = IcebergSink.from_options(options)  # a restart: the ledger, a table property, knows batch 3
    again(spark.createDataFrame([{"id": 999, "kind": "a"}], "id long, kind string"), 3)
    assert 999 not in {r["id"] for r in table_rows(catalog.load_table("ev.a"))}


def test_a_table_created_by_someone_else_is_left_alone_unless_asked_and_a_failure_is_tried_again(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace_if_not_exists("db")
    schema = pa.schema([pa.field("id", pa.int64())])
    catalog.create_table("db.theirs", schema=schema)
    small = {"maintenance.compact.min-small-files": "2", "table": "db.theirs", "sink-id": "s1"}
    sink = IcebergSink.from_options({**catalog_options, **small})
    for batch_id in range(3):
        sink(spark.createDataFrame([{"id": batch_id}], "id long"), batch_id)
    assert len(list(catalog.load_table("db.theirs").scan().plan_files())) == 3

    opted_in = IcebergSink.from_options({**catalog_options, **small, "maintenance.enabled": "true"})
    failpoints.arm("maintenance.commit", "raise")  # the compaction fails: the batch stands
    try:
        opted_in(spark.createDataFrame([{"id": 3}], "id long"), 3)
    finally:
        failpoints.disarm_all()
    table = catalog.load_table("db.theirs")
    assert len(list(table.scan().plan_files())) == 4
    assert _sample(opted_in, "icesink_maintenance_runs_total", table="db.theirs", outcome="failed") == 1
    opted_in(spark.createDataFrame([{"id": 4}], "id long"), 4)  # tried again after the next batch
    table = catalog.load_table("db.theirs")
    assert len(list(table.scan().plan_files())) == 1
    assert sorted(r["id"] for r in table_rows(table)) == [0, 1, 2, 3, 4]
    assert _sample(opted_in, "icesink_maintenance_runs_total", table="db.theirs", outcome="done") == 1
    assert _sample(sink, "icesink_maintenance_runs_total", table="db.theirs", outcome="done") == 0


def test_orphan_removal_spares_the_files_of_staged_batches(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {
        **catalog_options,
        "table": "db.staged",
        "sink-id": "s1",
        "commit.max-batches": "3",
        "maintenance.orphan.interval-s": "0",
    }
    sink = IcebergSink.from_options(options)
    sink(spark.createDataFrame([{"id": 0}], "id long"), 0)  # staged, not committed
    table = sink.catalog.load_table("db.staged")
    data = Path(table.location().removeprefix("file://")) / "data"
    staged = list(data.rglob("*.parquet"))
    orphan = data / "crashed" / "orphan.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"x")
    two_days_ago = time.time() - 2 * 24 * 3600
    for path in [*staged, orphan]:  # the staged batch's files as old as the orphan
        os.utime(path, (two_days_ago, two_days_ago))

    sink(spark.createDataFrame([{"id": 1}], "id long"), 1)  # staged too; then maintenance

    assert not orphan.exists()
    assert staged and all(p.exists() for p in staged)
    assert _sample(sink, "icesink_maintenance_files_total", table="db.staged", action="orphan_deleted") == 1
    sink(spark.createDataFrame([{"id": 2}], "id long"), 2)  # the third batch commits all three
    sink.close()
    table = catalog_from_options(catalog_options).load_table("db.staged")
    assert sorted(r["id"] for r in table_rows(table)) == [0, 1, 2]
