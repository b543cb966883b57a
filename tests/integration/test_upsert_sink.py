"""Upserts through the sink (``write.mode=upsert``), read back by pyiceberg and DuckDB, then compacted."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink import ConfigError, IcebergSink, SinkConfig, compact
from icesink.errors import UpsertError
from icesink.jobs.compact import main as compact_job
from icesink.maintenance import referenced_files
from tests.integration.test_crash_recovery import job_arguments, job_result, run_job
from tests.support.duckdb_reader import duckdb_read
from tests.support.tables import catalog_from_options
from tests.support.upserts import CHANGE_BATCHES, State, changes, expected_state, rows_of

BATCHES = [
    *CHANGE_BATCHES[:2],
    # and changes the sink rejects to the dead-letter table: a null key, an unknown op, a truncate
    pa.concat_tables(
        [
            CHANGE_BATCHES[2],
            changes((None, "no key", 1, "u", 2), (7, "bad op", 1, "x", 2), (None, None, None, "t", 2)),
        ]
    ),
    *CHANGE_BATCHES[3:],
]
REJECTED = {("null_key", "id"), ("unknown_op", "_op"), ("truncate", "_op")}


def upsert_options(catalog_options: dict[str, str], **more: str) -> dict[str, str]:
    return {
        **catalog_options,
        "table": "db.items",
        "partition-by": "bucket(4, id)",
        "write.mode": "upsert",
        "upsert.key-columns": "id",
        "upsert.order-column": "seq",
        "sink-id": "s1",
        **more,
    }


def valid_changes(batch: pa.Table) -> pa.Table:
    """The rows of ``batch`` that are changes (no null key, a known op), for the model."""
    rows = [r for r in batch.to_pylist() if r["id"] is not None and r["_op"] in ("c", "r", "u", "d")]
    return pa.Table.from_pylist(rows, batch.schema)


def assert_reads(table: Table, state: State) -> None:
    """pyiceberg and DuckDB read ``state``; no equality delete; every file on disk is referenced."""
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    snapshot = table.current_snapshot()
    assert snapshot is not None
    entries = [e for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]
    assert all(e.data_file.content != DataFileContent.EQUALITY_DELETES for e in entries)
    referenced = {p for p in referenced_files(table) if p.endswith(".parquet")}  # any snapshot's
    assert {e.data_file.file_path for e in entries} <= referenced
    on_disk = {f"file://{p}" for p in Path(table.location().removeprefix("file://")).rglob("*.parquet")}
    assert on_disk == referenced, "files of the table's folder that no snapshot references"


def test_changes_through_the_sink_then_compaction(
    spark: Any, catalog_options: dict[str, str], tmp_path: Path
) -> None:
    sink = IcebergSink.from_options(upsert_options(catalog_options))
    state: State = {}
    for batch_id, batch in enumerate(BATCHES):
        sink(spark.createDataFrame(batch), batch_id)
        expected_state(state, valid_changes(batch))
        assert_reads(sink.catalog.load_table("db.items"), state)

    table = sink.catalog.load_table("db.items")
    assert table.format_version == 2
    assert table.schema().column_names == ["id", "name", "v"]  # the op and order columns are not stored
    assert table.schema().identifier_field_names() == {"id"}
    assert table.schema().find_field("id").required
    assert state[1] == ("back", 1) and state[5] == ("fourth", 4) and state[0] == ("again", 0)
    assert 6 not in state and state[7] == ("n7", 7)  # the change with an unknown op left key 7 alone
    summary = table.snapshots()[1].summary
    assert summary is not None and summary.operation.value == "overwrite"
    assert summary["added-position-deletes"] == "18"  # 12 rows replaced, 6 deleted
    assert summary["icesink.batch-ids"] == "1"

    dead = sink.catalog.load_table("db.items__dlq").scan().to_arrow()
    assert {(r["reason"], r["column"]) for r in dead.to_pylist()} == REJECTED
    assert {r["batch_id"] for r in dead.to_pylist()} == {2}

    # A replayed batch is skipped: no second delete, no new snapshot.
    snapshots = len(table.snapshots())
    sink(spark.createDataFrame(BATCHES[1]), 1)
    table.refresh()
    assert len(table.snapshots()) == snapshots
    assert_reads(table, state)
    counters = _counters(sink)
    assert counters["icesink_replays_skipped_total"] == 1
    assert counters["icesink_deleted_keys_total"] == 6 + 3  # batch 1, batch 2 (6, 45 and 99)
    assert counters["icesink_delete_files_total"] >= 3
    assert counters["icesink_upserted_keys_total"] == 40 + 22 + 3 + 2
    # The sink kept its key index from batch to batch: no blob read back, never rebuilt.
    assert counters["icesink_key_index_entries_read_total"] == 0
    assert counters["icesink_key_index_rebuilds_total"] == 0
    lookups = [
        s.value
        for m in sink.metrics.registry.collect()
        for s in m.samples
        if s.name == "icesink_step_duration_seconds_count" and s.labels["step"] == "lookup"
    ]
    assert sum(lookups) == len(BATCHES)  # each batch's lookup timed as its step (the replay's skipped)
    for step in ("changes", "keys"):  # the split and the keys' collection: timed once a batch each
        timed = [
            s.value
            for m in sink.metrics.registry.collect()
            for s in m.samples
            if s.name == "icesink_step_duration_seconds_count" and s.labels["step"] == step
        ]
        assert sum(timed) == len(BATCHES), step

    report = compact(table, target_file_size_bytes=64 * 1024 * 1024)
    assert report.partitions >= 1 and report.removed_delete_files >= 3 and not report.given_up
    assert_reads(table, state)
    live = [e for m in table.current_snapshot().manifests(table.io) for e in m.fetch_manifest_entry(table.io)]  # type: ignore[union-attr]
    assert all(e.data_file.content == DataFileContent.DATA for e in live)


def test_a_batch_without_an_op_column_is_all_upserts(spark: Any, catalog_options: dict[str, str]) -> None:
    sink = IcebergSink.from_options(upsert_options(catalog_options))
    rows = [{"id": 1, "name": "a", "v": 1, "seq": 0}, {"id": 2, "name": "b", "v": 2, "seq": 0}]
    sink(spark.createDataFrame(pa.Table.from_pylist(rows)), 0)
    sink(spark.createDataFrame(pa.Table.from_pylist([{"id": 1, "name": "a2", "v": 3, "seq": 1}])), 1)
    table = sink.catalog.load_table("db.items")
    assert rows_of(table.scan().to_arrow()) == {1: ("a2", 3), 2: ("b", 2)}


def test_an_existing_table_without_the_key_or_v1_is_refused_before_writing(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace_if_not_exists("db")
    frame = spark.createDataFrame(BATCHES[0])
    append = IcebergSink.from_options(
        {**catalog_options, "table": "db.items", "table-property.format-version": "1"}
    )
    append.prepare(frame.drop("_op", "seq").schema)
    sink = IcebergSink.from_options(upsert_options(catalog_options))
    with pytest.raises(UpsertError, match="format version 1"):
        sink.prepare(frame.schema)
    with pytest.raises(UpsertError, match="format version 1"):
        sink(frame, 0)
    table = catalog.load_table("db.items")
    assert table.current_snapshot() is None

    other = IcebergSink.from_options(
        upsert_options(catalog_options, **{"upsert.key-columns": "v", "table": "db.items2"})
    )
    other.prepare(frame.schema)
    wrong_key = IcebergSink.from_options(
        upsert_options(catalog_options, **{"upsert.key-columns": "missing", "table": "db.items2"})
    )
    with pytest.raises(UpsertError, match="missing"):
        wrong_key(frame, 0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"write.mode": "upsert"}, "upsert.key-columns"),
        ({"write.mode": "merge"}, "write.mode"),
        ({"upsert.key-columns": "id"}, "write.mode"),
        ({"write.mode": "upsert", "upsert.key-columns": "id,"}, "upsert.key-columns"),
        ({"write.mode": "upsert", "upsert.key-columns": "_op"}, "op or order column"),
    ],
)
def test_bad_upsert_options_fail_at_construction(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SinkConfig.from_options({"table": "db.t", **options})


def _counters(sink: IcebergSink) -> dict[str, float]:
    totals: dict[str, float] = {}
    for metric in sink.metrics.registry.collect():
        for sample in metric.samples:
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    return totals


# A replay after the commit is also checked in process (test_upsert_row_delta's replayed
# batch); its SIGKILL run is in make test-faults.
@pytest.mark.parametrize(
    "crash_at", ["after-write", pytest.param("after-commit", marks=pytest.mark.faults_full)]
)
def test_sigkill_around_the_commit_then_restart_applies_every_change_once(
    tmp_path: Path, catalog_options: dict[str, str], crash_at: str
) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    for n, batch in enumerate(BATCHES):  # one file per micro-batch, in order of modification time
        path = folder / f"part-{n:03d}.parquet"
        pq.write_table(batch, path)
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
    options = upsert_options(catalog_options)
    options.pop("sink-id")  # the query's id: stable across the restart from the checkpoint
    common = job_arguments(folder, tmp_path / "ck", options)

    crashed = run_job(*common, "--crash-at", crash_at, "--crash-batch", "1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    table = catalog_from_options(options).load_table("db.items")
    assert len(table.snapshots()) == (1 if crash_at == "after-write" else 2)
    if crash_at == "after-write":  # the lookup wrote position deletes no snapshot references
        referenced = referenced_files(table)
        assert any(
            "-deletes-" in str(p) and f"file://{p}" not in referenced for p in tmp_path.rglob("*.parquet")
        )

    restarted = run_job(*common)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    result = job_result(restarted)
    state: State = {}
    for batch in BATCHES:
        expected_state(state, valid_changes(batch))
    table = catalog_from_options(options).load_table("db.items")
    assert_reads(table, state)  # the crashed attempt's data and delete files are gone
    assert len(table.snapshots()) == len(BATCHES)
    if crash_at == "after-write":
        assert result["icesink_orphan_files_total"] >= 2  # its data files and its delete files
        assert result["icesink_replays_skipped_total"] == 0
    else:
        assert result["icesink_replays_skipped_total"] == 1  # batch 1 replayed, recognised

    catalog_args = [f"--catalog-option={k.removeprefix('catalog.')}={v}" for k, v in catalog_options.items()]
    assert compact_job(["--table", "db.items", "--catalog-name", "test", *catalog_args]) == 0
    assert_reads(table, state)
    table.refresh()
    assert table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
