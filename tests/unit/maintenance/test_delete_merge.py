"""Delete files merged, data rewritten only where it pays (icesink.upsert.delete_merge, the scheduler).

On upserted SQLite tables written driver-side; each test reads the table back with pyiceberg and
DuckDB, counts delete files in the snapshot summary and the manifests, and checks that every
referenced file exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent, ManifestEntry
from pyiceberg.table import Table

from icesink import failpoints
from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance import referenced_files
from icesink.maintenance.rewrite_run import rewrite_partitions
from icesink.maintenance.scheduler import Budget, TableMaintenance
from icesink.upsert.delete_merge import merge_deletes
from icesink.upsert.key_index_update import KeyIndexStore
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import (
    BUCKETS,
    State,
    UpsertDriver,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
)

TARGET = 64 * 1024 * 1024
KEEP_NOTHING = lambda: lambda path: False  # noqa: E731
ALL_BUCKETS = [(b,) for b in range(BUCKETS)]


@pytest.fixture(autouse=True)
def _disarm() -> Any:
    yield
    failpoints.disarm_all()


def _live(table: Table) -> list[ManifestEntry]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        entry
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    ]


def _deletes_per_bucket(table: Table) -> dict[int, int]:
    counts: dict[int, int] = {}
    for entry in _live(table):
        if entry.data_file.content != DataFileContent.DATA:
            counts[entry.data_file.partition[0]] = counts.get(entry.data_file.partition[0], 0) + 1
    return counts


def _data_paths(table: Table) -> set[str]:
    return {e.data_file.file_path for e in _live(table) if e.data_file.content == DataFileContent.DATA}


def _check(table: Table, state: State) -> None:
    """pyiceberg and DuckDB see exactly ``state``; the summary counts the live delete files."""
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert int(snapshot.summary["total-delete-files"] or 0) == sum(_deletes_per_bucket(table).values())
    missing = [p for p in referenced_files(table) if not Path(p.removeprefix("file://")).exists()]
    assert missing == []


def _updates(table: Table, driver: UpsertDriver, state: State, batches: int, first: int = 0) -> None:
    """``batches`` batches, each changing every other key of 40 (a delete file per bucket each)."""
    for n in range(first, first + batches):
        batch = changes(*[(i, f"v{n}-{i}", n, "c" if n == 0 else "u", n) for i in range(n % 2, 40, 2)])
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()


def _table(tmp_path: Path, batches: int) -> tuple[Table, UpsertDriver, State]:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: State = {}
    first = changes(*[(i, f"v-{i}", 0, "c", 0) for i in range(40)])
    driver.apply(first)
    expected_state(state, first)
    _updates(table, driver, state, batches, first=1)
    return table, driver, state


def test_delete_files_merge_into_one_per_partition_without_a_data_file_rewritten(tmp_path: Path) -> None:
    table, _, state = _table(tmp_path, 5)  # 5 delete files per bucket
    data_before = _data_paths(table)
    replaced = [e for e in _live(table) if e.data_file.content != DataFileContent.DATA]
    assert _deletes_per_bucket(table) == dict.fromkeys(range(BUCKETS), 5)

    result = merge_deletes(table, ALL_BUCKETS, max_delete_files=2)

    assert result.partitions == BUCKETS and result.replaced_delete_files == 5 * BUCKETS
    table.refresh()
    assert _deletes_per_bucket(table) == dict.fromkeys(range(BUCKETS), 1)
    assert _data_paths(table) == data_before  # no data file read or written
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary.operation.value == "replace"
    assert snapshot.summary["removed-delete-files"] == str(5 * BUCKETS)
    assert snapshot.summary["added-delete-files"] == str(BUCKETS)
    # The merged files keep the largest data sequence number of those they replace (per partition).
    largest: dict[int, int] = {}
    for e in replaced:
        bucket = e.data_file.partition[0]
        largest[bucket] = max(largest.get(bucket, 0), e.sequence_number or 0)
    merged = [e for e in _live(table) if e.data_file.content != DataFileContent.DATA]
    assert {e.data_file.partition[0]: e.sequence_number for e in merged} == largest
    assert all((e.sequence_number or 0) < (snapshot.sequence_number or 0) for e in merged)
    for entry in merged:  # sorted by path (UTF-8 bytes) and position, as the spec requires, once each
        rows = pq.read_table(entry.data_file.file_path.removeprefix("file://")).to_pylist()
        pairs = [(r["file_path"].encode(), r["pos"]) for r in rows]
        assert pairs == sorted(set(pairs))
    _check(table, state)


def test_the_merged_file_never_applies_to_rows_written_after_it(tmp_path: Path) -> None:
    table, driver, state = _table(tmp_path, 5)
    merge_deletes(table, ALL_BUCKETS, max_delete_files=2)
    _updates(table, driver, state, 3, first=6)  # the keys change again after the merge
    _check(table, state)
    merge_deletes(table, ALL_BUCKETS, max_delete_files=2)  # the merged file merged again
    _check(table, state)
    assert all(n <= 2 for n in _deletes_per_bucket(table).values())


def test_a_batch_committing_deletes_during_a_merge_keeps_them(tmp_path: Path) -> None:
    table, driver, state = _table(tmp_path, 5)
    concurrent = changes(*[(i, "stream", 99, "u", 99) for i in range(0, 40, 3)])

    def stream_commits(point: str) -> None:
        driver.apply(concurrent)  # new deletes on files whose deletes are being merged

    failpoints.arm("maintenance.commit", "call", call=stream_commits)
    result = merge_deletes(table, ALL_BUCKETS, max_delete_files=2)
    expected_state(state, concurrent)

    assert result.snapshot_id is not None
    table.refresh()
    assert all(n == 2 for n in _deletes_per_bucket(table).values())  # the merged file and the batch's
    _check(table, state)


def test_a_merge_costs_the_key_index_nothing(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    store = KeyIndexStore(table.io, ["id"], "db.items", 64 * 1024 * 1024)
    driver = UpsertDriver(table, index=store)
    state: State = {}
    _updates(table, driver, state, 6)
    store.take_counts()

    merge_deletes(table, ALL_BUCKETS, max_delete_files=2)
    _updates(table, driver, state, 2, first=6)  # the index catches up from the merge

    counts = store.take_counts()
    assert counts.rebuilds == 0 and counts.catchup_files == 0
    _check(table, state)


def test_live_delete_files_stay_within_the_limit_across_30_batches(tmp_path: Path) -> None:
    table, driver, state = _table(tmp_path, 0)
    maintenance = TableMaintenance("db.items")
    config = MaintenanceConfig(max_delete_files=3, min_small_files=4, partitions_per_batch=1)
    compacted = []
    for n in range(1, 31):
        _updates(table, driver, state, 1, first=n)
        run = maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING)
        compacted.append(run.compacted_partitions)
        table.refresh()
        assert all(count <= 3 for count in _deletes_per_bucket(table).values()), n
        assert len(_data_paths(table)) <= BUCKETS * 10, n  # small files rewritten as they come
    assert max(compacted) == 1 and sum(compacted) >= BUCKETS  # spread: one partition per batch
    _check(table, state)


def test_dangling_positions_are_dropped_and_big_files_left_alone(tmp_path: Path) -> None:
    table, _, state = _table(tmp_path, 0)
    config = MaintenanceConfig(max_delete_files=2, min_small_files=3, delete_ratio_threshold=1.0)
    maintenance = TableMaintenance("db.items")
    driver = UpsertDriver(table, sink_id="s2")
    _updates(table, driver, state, 4, first=1)
    maintenance.run(table, config, TARGET, Budget(60), KEEP_NOTHING)  # merges, then a partition rewritten
    table.refresh()
    live = _data_paths(table)
    for entry in _live(table):
        if entry.data_file.content != DataFileContent.DATA:
            paths = set(
                pq.read_table(entry.data_file.file_path.removeprefix("file://"))["file_path"].to_pylist()
            )
            assert paths <= live  # no position of a data file gone
    _check(table, state)


def test_a_failed_merge_leaves_none_of_the_runs_merged_files_behind(tmp_path: Path) -> None:
    """One partition's merge fails (a delete file unreadable): the run commits nothing and deletes
    what the other partitions' merges wrote; once readable again, the next run merges them all."""
    table, _, state = _table(tmp_path, 5)  # 5 delete files per bucket: every bucket's merge due
    before = table.metadata.current_snapshot_id
    config = MaintenanceConfig(max_delete_files=2)
    unreadable = next(e for e in _live(table) if e.data_file.content != DataFileContent.DATA)
    local = Path(unreadable.data_file.file_path.removeprefix("file://"))
    saved = local.read_bytes()
    local.unlink()

    with pytest.raises(OSError):
        rewrite_partitions(table, [], ALL_BUCKETS, config, TARGET, lambda: True)

    table.refresh()
    assert table.metadata.current_snapshot_id == before
    folder = Path(table.location().removeprefix("file://"))
    assert sorted(p.name for p in folder.rglob("merged-deletes-*")) == []
    local.write_bytes(saved)
    run = rewrite_partitions(table, [], ALL_BUCKETS, config, TARGET, lambda: True)
    assert len(run.merges) == BUCKETS
    table.refresh()
    assert _deletes_per_bucket(table) == dict.fromkeys(range(BUCKETS), 1)
    _check(table, state)
