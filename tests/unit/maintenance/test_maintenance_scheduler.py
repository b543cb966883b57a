"""A table's maintenance after its commits (icesink.maintenance.scheduler), on an upserted SQLite table.

Each test reads the table back: rows through pyiceberg and DuckDB, delete files, snapshots,
the files every snapshot references on disk, and the replay check.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink import failpoints
from icesink.commit import ledger
from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance import referenced_files
from icesink.maintenance.scheduler import Budget, TableMaintenance
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import (
    BUCKETS,
    State,
    UpsertDriver,
    bucket_of,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
)

TARGET = 64 * 1024 * 1024
KEEP_NOTHING = lambda: lambda path: False  # noqa: E731
NO_REWRITES = {"max_delete_files": 1000, "min_delete_files": 1000, "min_small_files": 1000}


@pytest.fixture(autouse=True)
def _disarm() -> Any:
    yield
    failpoints.disarm_all()


def _upserts(tmp_path: Path, batches: int) -> tuple[Table, UpsertDriver, State]:
    """Inserts of 40 keys, then ``batches - 1`` batches updating every key: a delete file per bucket each."""
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: State = {}
    for n in range(batches):
        batch = changes(*[(i, f"v{n}-{i}", n, "c" if n == 0 else "u", n) for i in range(40)])
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()
    return table, driver, state


def _delete_files(table: Table) -> dict[int, int]:
    """Live delete files per bucket."""
    counts: dict[int, int] = {}
    snapshot = table.current_snapshot()
    assert snapshot is not None
    for manifest in snapshot.manifests(table.io):
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            if entry.data_file.content != DataFileContent.DATA:
                bucket = entry.data_file.partition[0]
                counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def _check_readable(table: Table, state: State, duckdb: bool = True) -> None:
    """pyiceberg (and DuckDB) see exactly ``state``; every file a snapshot references exists."""
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    if duckdb:
        assert rows_of(duckdb_read(table.metadata_location)) == state
    missing = [p for p in referenced_files(table) if not Path(p.removeprefix("file://")).exists()]
    assert missing == []


def test_partitions_past_the_delete_file_threshold_are_compacted(tmp_path: Path) -> None:
    table, _, state = _upserts(tmp_path, 4)  # 3 delete files per bucket
    before = rows_of(table.scan().to_arrow())
    config = MaintenanceConfig(min_delete_files=3, partitions_per_batch=BUCKETS)

    run = TableMaintenance("db.items").run(table, config, TARGET, Budget(60), KEEP_NOTHING)

    assert run.compacted_partitions == BUCKETS and run.removed_delete_files == 3 * BUCKETS
    assert run.delete_files == 0 and run.pending == 0 and run.outcome == "done"
    assert _delete_files(table) == {}
    assert before == state
    _check_readable(table, state)


def test_compactions_and_merges_of_one_run_are_one_snapshot(tmp_path: Path) -> None:
    table, driver, state = _upserts(tmp_path, 6)  # 5 delete files per bucket: every bucket due for both
    snapshots = len(table.snapshots())
    config = MaintenanceConfig(min_delete_files=5, partitions_per_batch=2)

    run = TableMaintenance("db.items").run(table, config, TARGET, Budget(60), KEEP_NOTHING)

    table.refresh()
    assert len(table.snapshots()) == snapshots + 1  # one replace snapshot for all of it
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.operation.value == "replace"
    assert run.compacted_partitions == 2 and run.merged_partitions == BUCKETS - 2 and run.pending == 2
    deletes = _delete_files(table)
    assert sorted(deletes.values()) == [1] * (BUCKETS - 2)  # compacted buckets have none left
    _check_readable(table, state)
    batch = changes(*[(i, f"after-{i}", 7, "u", 7) for i in range(0, 40, 3)])
    driver.apply(batch)  # the stream goes on over the rewritten files
    expected_state(state, batch)
    _check_readable(table, state)


def test_below_the_thresholds_nothing_is_touched(tmp_path: Path) -> None:
    table, driver, state = _upserts(tmp_path, 1)
    for n in range(1, 3):  # new keys and a few changes: delete files, few rows deleted
        batch = changes(
            *[(i, f"v{n}-{i}", n, "c", n) for i in range(40 * n, 40 * n + 40)], (n, "x", n, "u", n)
        )
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()
    snapshots, deletes = len(table.snapshots()), sum(_delete_files(table).values())

    run = TableMaintenance("db.items").run(table, MaintenanceConfig(), TARGET, Budget(60), KEEP_NOTHING)

    table.refresh()
    assert run.compacted_partitions == 0 and run.merged_partitions == 0 and run.expired_snapshots == 0
    assert len(table.snapshots()) == snapshots and deletes > 0
    assert sum(_delete_files(table).values()) == deletes
    _check_readable(table, state)


def test_work_past_the_budget_continues_after_the_next_batches(tmp_path: Path) -> None:
    table, driver, state = _upserts(tmp_path, 4)
    maintenance, config = (
        TableMaintenance("db.items"),
        MaintenanceConfig(min_delete_files=3, partitions_per_batch=BUCKETS),
    )
    left = []
    for n in range(BUCKETS):
        run = maintenance.run(table, config, TARGET, Budget(0), KEEP_NOTHING)  # one unit per batch
        assert run.compacted_partitions == 1
        left.append(run.pending)
        batch = changes((100 + n, "new", n, "c", 9))
        driver.apply(batch)  # the stream goes on between two runs
        expected_state(state, batch)
        table.refresh()
    assert left == [3, 2, 1, 0]
    assert all(n <= 1 for n in _delete_files(table).values())  # at most the last batch's
    _check_readable(table, state)


def test_a_concurrent_commit_wins_and_the_compaction_is_tried_again(tmp_path: Path) -> None:
    table, driver, state = _upserts(tmp_path, 4)
    maintenance, config = (
        TableMaintenance("db.items"),
        MaintenanceConfig(min_delete_files=3, partitions_per_batch=BUCKETS),
    )
    key = next(i for i in range(40) if bucket_of(i) == 0)  # bucket 0 is compacted first (sorted)
    concurrent = changes((key, "stream", 99, "u", 99))

    def stream_commits(point: str) -> None:
        driver.apply(concurrent)  # the stream's commit lands while the compaction is written

    failpoints.arm("maintenance.commit", "call", call=stream_commits)
    run = maintenance.run(table, config, TARGET, Budget(0), KEEP_NOTHING)

    expected_state(state, concurrent)
    assert run.conflicts == 1 and run.outcome == "conflict" and run.compacted_partitions == 0
    assert run.pending == BUCKETS  # the partition waits for the next run
    _check_readable(table, state, duckdb=False)  # the stream's change is there, once
    run = maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING)
    assert run.compacted_partitions == BUCKETS and run.conflicts == 0
    assert _delete_files(table) == {}
    _check_readable(table, state)


def test_a_crash_in_the_middle_of_a_compaction_loses_nothing(tmp_path: Path) -> None:
    table, _, state = _upserts(tmp_path, 4)
    config = MaintenanceConfig(min_delete_files=3, partitions_per_batch=BUCKETS)
    failpoints.arm("maintenance.commit", "raise")
    with pytest.raises(failpoints.InjectedFault):
        TableMaintenance("db.items").run(table, config, TARGET, Budget(60), KEEP_NOTHING)
    _check_readable(table, state, duckdb=False)  # the crash left the table as it was

    restarted = sql_catalog(tmp_path).load_table("db.items")  # a new process: no state kept
    run = TableMaintenance("db.items").run(restarted, config, TARGET, Budget(60), KEEP_NOTHING)
    assert run.compacted_partitions == BUCKETS
    _check_readable(restarted, state)


def test_snapshots_expire_by_policy_and_replays_are_still_recognised(tmp_path: Path) -> None:
    table, _, state = _upserts(tmp_path, 4)
    assert len(table.snapshots()) == 4
    config = MaintenanceConfig(max_snapshot_age_s=0, min_snapshots_to_keep=2, **NO_REWRITES)

    run = TableMaintenance("db.items").run(table, config, TARGET, Budget(60), KEEP_NOTHING)

    table.refresh()
    assert run.expired_snapshots == 2 and len(table.snapshots()) == 2
    assert run.expired_files > 0  # the first batch's manifest list at least
    assert all(ledger.is_committed(table, "s1", b) for b in range(4))  # batch 0's snapshot is gone
    assert not ledger.is_committed(table, "s1", 4)
    _check_readable(table, state)


def test_recent_snapshots_are_kept_by_default(tmp_path: Path) -> None:
    table, _, _ = _upserts(tmp_path, 4)
    config = MaintenanceConfig(min_snapshots_to_keep=1, **NO_REWRITES)  # 5 days of history kept
    run = TableMaintenance("db.items").run(table, config, TARGET, Budget(60), KEEP_NOTHING)
    table.refresh()
    assert run.expired_snapshots == 0 and len(table.snapshots()) == 4


def _old_file(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(path, (two_days_ago, two_days_ago))
    return f"file://{path}"


def test_old_orphan_files_are_removed_but_not_files_the_sink_keeps(tmp_path: Path) -> None:
    table, _, state = _upserts(tmp_path, 2)
    data = Path(table.location().removeprefix("file://")) / "data"
    orphan = _old_file(data / "crashed-attempt" / "orphan.parquet")
    staged = _old_file(data / "staged-attempt" / "staged.parquet")
    new = data / "writing-now.parquet"
    new.write_bytes(b"x")
    config = MaintenanceConfig(orphan_interval_s=0)

    run = TableMaintenance("db.items").run(
        table, config, TARGET, Budget(60), lambda: lambda path: path == staged
    )

    assert run.orphan_files == 1
    assert not Path(orphan.removeprefix("file://")).exists()
    assert Path(staged.removeprefix("file://")).exists() and new.exists()
    _check_readable(table, state)


def test_orphan_files_wait_for_their_interval(tmp_path: Path) -> None:
    table, _, _ = _upserts(tmp_path, 1)
    data = Path(table.location().removeprefix("file://")) / "data"
    orphan = _old_file(data / "orphan.parquet")
    now = [0.0]
    maintenance = TableMaintenance("db.items", clock=lambda: now[0])
    config = MaintenanceConfig(orphan_interval_s=3600)

    assert maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING).orphan_files == 0
    now[0] = 3600.0
    assert maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING).orphan_files == 1
    assert not Path(orphan.removeprefix("file://")).exists()


def test_a_failed_orphan_removal_is_tried_again_after_the_next_batch(tmp_path: Path) -> None:
    table, _, _ = _upserts(tmp_path, 1)
    data = Path(table.location().removeprefix("file://")) / "data"
    orphan = _old_file(data / "orphan.parquet")
    now = [0.0]
    maintenance = TableMaintenance("db.items", clock=lambda: now[0])
    config = MaintenanceConfig(orphan_interval_s=3600)
    now[0] = 3600.0  # due
    failpoints.arm("maintenance", "raise")  # between finding the orphans and deleting them
    with pytest.raises(failpoints.InjectedFault):
        maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING)
    assert Path(orphan.removeprefix("file://")).exists()
    # The next batch, at once: still due, not an interval later.
    assert maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING).orphan_files == 1
    assert not Path(orphan.removeprefix("file://")).exists()
