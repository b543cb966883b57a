"""Upserts through the building blocks, read back by pyiceberg and by DuckDB's iceberg extension."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent, ManifestContent
from pyiceberg.table import Table

from icesink.commit.ledger import BatchRange
from icesink.config import CommitConfig
from icesink.errors import RowDeltaConflictError, UpsertError
from icesink.upsert import row_delta
from icesink.upsert.changes import change_frames
from icesink.upsert.lookup import LookupResult, LookupSpec, run_lookup, run_lookup_locally
from icesink.upsert.messages import LookupTask
from icesink.upsert.row_delta import RowDeltaCommitter
from icesink.write.manifest_entry import data_file_from_message
from icesink.write.task import run_write
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import (
    CHANGE_BATCHES,
    UpsertDriver,
    bucket_of,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
    write_data_files,
    write_spec,
)


def _all_entries(table: Table) -> list[Any]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        (manifest.content, entry)
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io)
    ]


def _assert_reads(table: Table, state: dict[int, tuple[str | None, int | None]]) -> None:
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    entries = _all_entries(table)
    assert all(entry.data_file.content != DataFileContent.EQUALITY_DELETES for _, entry in entries)
    for content, entry in entries:  # delete files only in delete manifests, data files only in data ones
        assert (content == ManifestContent.DELETES) == (entry.data_file.content != DataFileContent.DATA)


def test_changes_read_back_through_pyiceberg_and_duckdb(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: dict[int, tuple[str | None, int | None]] = {}
    outcomes = []
    for batch in CHANGE_BATCHES:
        outcomes.append(driver.apply(batch))
        expected_state(state, batch)
        table.refresh()
        _assert_reads(table, state)

    assert state[1] == ("back", 1) and 5 in state and state[5] == ("fourth", 4) and state[0] == ("again", 0)
    assert 6 not in state and 45 not in state
    # Batch 1 changed 18 existing keys (15 and 36 updated, then deleted: the later row wins),
    # 12 of them replaced and 6 deleted, and inserted 10: 18 position deletes, 22 new rows.
    snapshots = table.snapshots()
    summary = snapshots[1].summary
    assert summary is not None
    assert summary.operation.value == "overwrite"
    assert summary["added-position-deletes"] == "18"
    assert summary["added-records"] == str(12 + 10)
    assert summary["icesink.batch-ids"] == "1"
    assert (
        int(str(summary["added-delete-files"])) == outcomes[1].delete_files == outcomes[1].report.files_read
    )
    assert summary["total-records"] == str(40 + 22)
    assert summary["total-position-deletes"] == "18"
    assert table.metadata.properties["icesink.sink.s1.last-batch-id"] == str(len(CHANGE_BATCHES) - 1)
    # Sequence numbers: one per snapshot, and every delete file has its snapshot's.
    assert [s.sequence_number for s in snapshots] == list(range(1, len(CHANGE_BATCHES) + 1))
    for content, entry in _all_entries(table):
        if content == ManifestContent.DELETES:
            assert entry.sequence_number == _sequence_number(table, entry.snapshot_id)


def test_manifests_are_merged_and_every_delete_still_applies(tmp_path: Path) -> None:
    merging = {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "3"}
    table = create_table(sql_catalog(tmp_path), properties=merging)
    driver = UpsertDriver(table)
    state: dict[int, tuple[str | None, int | None]] = {}
    more = [changes(*[(k, f"m{n}", n, "u", 10 + n) for k in range(n, 50, 4)]) for n in range(4)]
    for batch in [*CHANGE_BATCHES, *more]:
        driver.apply(batch)
        expected_state(state, batch)
        table.refresh()
        _assert_reads(table, state)

    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    assert len(manifests) <= 4  # without merging: one data and one delete manifest per batch
    assert {m.content for m in manifests} == {ManifestContent.DATA, ManifestContent.DELETES}
    for _, entry in _all_entries(table):  # merged entries keep the sequence number of their commit
        assert entry.sequence_number == _sequence_number(table, entry.snapshot_id)


def test_lookup_reads_only_the_files_of_the_keys_buckets(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    for start in range(0, 400, 100):  # four batches: several files per bucket
        driver.apply(changes(*[(i, f"n{i}", i, "c", 0) for i in range(start, start + 100)]))
    keys = [k for k in range(400) if bucket_of(k) == 2][:5]
    outcome = driver.apply(changes(*[(k, "u", 1, "u", 1) for k in keys]))

    table.refresh()
    files_per_bucket: dict[int, int] = {}
    for task in table.scan().plan_files():
        files_per_bucket[task.file.partition[0]] = files_per_bucket.get(task.file.partition[0], 0) + 1
    assert outcome.plan.files_in_table == sum(files_per_bucket.values()) - 1  # before this batch's file
    assert 0 < outcome.plan.files_to_read <= files_per_bucket[2] - 1
    assert {task.partition for task in outcome.plan.tasks} == {(2,)}
    assert outcome.report.rows_matched == len(keys)
    assert rows_of(table.scan().to_arrow())[keys[0]] == ("u", 1)


def test_replayed_batch_is_skipped_and_deletes_nothing(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    driver.apply(CHANGE_BATCHES[0])
    change = CHANGE_BATCHES[1]
    first = driver.apply(change)
    snapshot = table.current_snapshot()
    # Spark replays batch 1: same id, a new attempt.
    replay = driver.applier.apply(pa.table({"id": pa.array([0, 3], pa.int64())}), [], 1, "b1a1")

    # The commit itself checks the ledger too (a replay racing the first attempt).
    committer = RowDeltaCommitter(table, "s1", CommitConfig(retries=0))
    direct = committer.commit([], [], first.plan.snapshot_id, BatchRange(1, 1), {1: "b1a2"})

    table.refresh()
    assert first.commit.snapshot_id is not None
    assert replay.commit.skipped_replay and replay.commit.snapshot_id is None
    assert direct.skipped_replay and direct.snapshot_id is None
    assert table.current_snapshot() == snapshot
    assert rows_of(table.scan().to_arrow())[3] == ("u3", 30)


def _rewrite_file(table: Table, path: str) -> None:
    """A concurrent compaction of one data file: its live rows into a new file, the old one removed."""
    scan_task = next(t for t in table.scan().plan_files() if t.file.file_path == path)
    rows = pq.read_table(path.removeprefix("file://"))
    deleted: list[int] = []
    for delete_file in scan_task.delete_files:
        deletes = pq.read_table(delete_file.file_path.removeprefix("file://"))
        deleted += deletes.filter(pc.equal(deletes.column("file_path"), path)).column("pos").to_pylist()
    keep = pc.invert(pc.is_in(pa.array(range(rows.num_rows), pa.int64()), pa.array(deleted, pa.int64())))
    [message] = write_data_files(table, rows.filter(keep), "rewrite")
    with table.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
        overwrite.delete_data_file(scan_task.file)
        overwrite.append_data_file(data_file_from_message(message))


class _ConcurrentAfterLookup:
    """Runs lookups locally; after the first, lets another writer commit ``action``."""

    def __init__(self, table: Table, action: str) -> None:
        self.table, self.action, self.calls = table, action, 0

    def __call__(self, tasks: list[LookupTask], spec: LookupSpec) -> LookupResult:
        result = run_lookup_locally(tasks, spec)
        self.calls += 1
        if self.calls == 1:
            other = self.table.catalog.load_table(self.table.name())
            if self.action == "rewrite":
                _rewrite_file(other, tasks[0].data_file)
            else:
                other.append(
                    pa.table(
                        {
                            "id": pa.array([1000, 1001], pa.int64()),
                            "name": ["a", "b"],
                            "v": pa.array([1, 2], pa.int64()),
                        },
                        schema=other.schema().as_arrow(),
                    )
                )
        return result


def test_conflict_names_the_removed_file_and_the_lookup_is_redone(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    UpsertDriver(table, sink_id="loader").apply(CHANGE_BATCHES[0])
    table.refresh()
    lookup = _ConcurrentAfterLookup(table, "rewrite")
    driver = UpsertDriver(table, run_lookup=lookup)
    outcome = driver.apply(CHANGE_BATCHES[1])

    table.refresh()
    state: dict[int, tuple[str | None, int | None]] = {}
    for batch in CHANGE_BATCHES[:2]:
        expected_state(state, batch)
    assert outcome.redos == 1 and lookup.calls == 2
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state


def test_row_delta_refuses_when_a_referenced_file_was_removed(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    UpsertDriver(table, sink_id="loader").apply(CHANGE_BATCHES[0])
    table.refresh()
    start = table.current_snapshot()
    assert start is not None
    from icesink.upsert.plan import LookupPlanner

    plan = LookupPlanner(table.io, ["id"]).plan(table.metadata, pa.table({"id": pa.array([3], pa.int64())}))
    result = run_lookup_locally(plan.tasks, LookupSpec("db.items", dict(table.io.properties), "t"))
    [delete_file] = result.delete_files
    _rewrite_file(table.catalog.load_table(table.name()), plan.tasks[0].data_file)

    committer = RowDeltaCommitter(table, "s2", CommitConfig(retries=1, min_wait_ms=1, max_wait_ms=1))
    with pytest.raises(RowDeltaConflictError) as raised:
        committer.commit([], [delete_file], start.snapshot_id, BatchRange(0, 0), {0: "a"})

    assert raised.value.files == (plan.tasks[0].data_file,)
    assert "ICESINK-ROW-DELTA-CONFLICT" in str(raised.value) and raised.value.retryable
    table.refresh()
    assert rows_of(table.scan().to_arrow())[3] == ("n3", 3)  # nothing committed


def test_concurrent_upsert_of_the_same_key_is_redone_last_writer_wins(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    UpsertDriver(table, sink_id="loader").apply(CHANGE_BATCHES[0])
    table.refresh()
    other = UpsertDriver(table.catalog.load_table(table.name()), sink_id="other")
    first = changes((3, "other", 1, "u", 1))
    mine = changes((3, "mine", 2, "u", 1), (4, "mine", 2, "u", 1))

    def other_upserts_first(tasks: list[LookupTask], spec: LookupSpec) -> LookupResult:
        result = run_lookup_locally(tasks, spec)
        if not calls:
            other.apply(first)  # deletes the same row of the same data file
        calls.append(1)
        return result

    calls: list[int] = []
    outcome = UpsertDriver(table, run_lookup=other_upserts_first).apply(mine)

    state: dict[int, tuple[str | None, int | None]] = {}
    for batch in (CHANGE_BATCHES[0], first, mine):
        expected_state(state, batch)
    table.refresh()
    assert outcome.redos == 1
    assert rows_of(table.scan().to_arrow()) == state  # one row for key 3: "mine"
    assert rows_of(duckdb_read(table.metadata_location)) == state


def test_concurrent_append_is_not_a_conflict(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    UpsertDriver(table, sink_id="loader").apply(CHANGE_BATCHES[0])
    table.refresh()
    lookup = _ConcurrentAfterLookup(table, "append")
    outcome = UpsertDriver(table, run_lookup=lookup).apply(CHANGE_BATCHES[1])

    table.refresh()
    state: dict[int, tuple[str | None, int | None]] = {1000: ("a", 1), 1001: ("b", 2)}
    for batch in CHANGE_BATCHES[:2]:
        expected_state(state, batch)
    assert outcome.redos == 0 and lookup.calls == 1
    assert rows_of(table.scan().to_arrow()) == state


def test_commit_refused_by_the_catalog_is_rebuilt_on_the_new_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    driver.apply(CHANGE_BATCHES[0])
    real_commit = row_delta.metadata_cache.commit
    calls: list[int] = []

    def append_first(*args: Any) -> None:
        if not calls:  # another writer commits between this attempt's build and its commit
            other = table.catalog.load_table(table.name())
            other.append(
                pa.table(
                    {"id": pa.array([1000], pa.int64()), "name": ["a"], "v": pa.array([1], pa.int64())},
                    schema=other.schema().as_arrow(),
                )
            )
        calls.append(1)
        real_commit(*args)

    monkeypatch.setattr(row_delta.metadata_cache, "commit", append_first)
    outcome = driver.apply(CHANGE_BATCHES[1])

    table.refresh()
    state: dict[int, tuple[str | None, int | None]] = {1000: ("a", 1)}
    for batch in CHANGE_BATCHES[:2]:
        expected_state(state, batch)
    assert (outcome.commit.attempts, outcome.commit.conflicts, len(calls)) == (2, 1, 2)
    _assert_reads(table, state)
    snapshots = table.snapshots()
    assert snapshots[-1].parent_snapshot_id == snapshots[-2].snapshot_id
    assert snapshots[-2].summary.operation.value == "append"  # type: ignore[union-attr]
    assert [s.sequence_number for s in snapshots] == [1, 2, 3]
    metadata = Path(table.location().removeprefix("file://")) / "metadata"
    assert (
        len(list(metadata.glob(f"snap-{outcome.commit.snapshot_id}-*.avro"))) == 1
    )  # the refused one removed


def test_format_v1_table_is_refused(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path), format_version=1)
    with pytest.raises(UpsertError, match="format version 2"):
        UpsertDriver(table)


def test_batches_in_spark_end_to_end(tmp_path: Path, spark: Any) -> None:
    """The per-batch story on Spark: last change per key, data written and keys looked up in tasks."""
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table, run_lookup=lambda tasks, spec: run_lookup(spark, tasks, spec, parallelism=2))
    state: dict[int, tuple[str | None, int | None]] = {}
    for batch_id, batch in enumerate(CHANGE_BATCHES):
        frames = change_frames(spark.createDataFrame(batch.to_pandas()), ["id"], "_op", "seq")
        spec = write_spec(table, f"spark-b{batch_id}")
        written = run_write(frames.rows.select("id", "name", "v"), spec)
        outcome = driver.applier.apply(frames.keys, written.files, batch_id, f"spark-b{batch_id}a0")
        expected_state(state, batch)
        assert frames.rejected.count() == 0
    table.refresh()
    assert outcome.report.files_read == outcome.plan.files_to_read > 0
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state


def _sequence_number(table: Table, snapshot_id: int | None) -> int | None:
    snapshot = table.metadata.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    assert snapshot is not None
    return snapshot.sequence_number
