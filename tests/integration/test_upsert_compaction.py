"""Compaction of upserted partitions: same rows through both readers, no delete file left, conflict-safe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink.errors import RewriteConflictError
from icesink.upsert import compaction
from icesink.upsert.compaction import compact_partition
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


def _upserted(tmp_path: Path) -> tuple[Table, UpsertDriver, State]:
    """A table after inserts, then three batches of updates and deletes (many small files)."""
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: State = {}
    batches = [
        changes(*[(i, f"n{i}", i, "c", 0) for i in range(60)]),
        changes(
            *[(i, f"u{i}", i, "u", 1) for i in range(0, 60, 2)],
            *[(i, None, None, "d", 1) for i in range(1, 60, 5)],
        ),
        changes(*[(i, f"w{i}", i, "u", 2) for i in range(0, 60, 3)], (1, "back", 1, "c", 2)),
    ]
    for batch in batches:
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()
    return table, driver, state


def _live_files(table: Table) -> list[Any]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [e.data_file for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)]


def test_compacted_partitions_read_the_same_without_delete_files(tmp_path: Path) -> None:
    table, driver, state = _upserted(tmp_path)
    assert any(f.content == DataFileContent.POSITION_DELETES for f in _live_files(table))

    results = [compact_partition(table, (bucket,)) for bucket in range(BUCKETS)]

    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
    files = _live_files(table)
    assert all(f.content == DataFileContent.DATA for f in files)
    assert sorted(f.partition[0] for f in files) == list(range(BUCKETS))  # one file per bucket
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.operation.value == "replace"
    assert summary["total-delete-files"] == "0" and summary["total-position-deletes"] == "0"
    assert summary["total-records"] == str(len(state))
    assert sum(r.rows for r in results) == len(state)
    assert all(r.removed_delete_files > 0 for r in results)

    # Upserts go on against the compacted files.
    more = changes((0, "after", 1, "u", 9), (2, None, None, "d", 9))
    driver.apply(more)
    expected_state(state, more)
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state


def test_concurrent_upsert_makes_the_compaction_give_up_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table, driver, state = _upserted(tmp_path)
    key = next(k for k in state if bucket_of(k) == 0)
    concurrent = changes((key, "concurrent", 7, "u", 9))
    real_write = compaction._write

    def write_then_upsert(*args: Any) -> Any:
        written = real_write(*args)
        driver.apply(concurrent)  # commits while the compaction holds the old rows
        return written

    monkeypatch.setattr(compaction, "_write", write_then_upsert)
    with pytest.raises(RewriteConflictError) as raised:
        compact_partition(table, (0,))

    expected_state(state, concurrent)
    table.refresh()
    assert raised.value.retryable
    assert rows_of(table.scan().to_arrow()) == state  # the concurrent change is not lost
    assert not list((Path(table.location().removeprefix("file://")) / "data").rglob("compact-*"))
    monkeypatch.setattr(compaction, "_write", real_write)
    assert compact_partition(table, (0,)).snapshot_id is not None  # the next run goes through
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state


def test_concurrent_append_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, _, state = _upserted(tmp_path)
    real_write = compaction._write

    def write_then_append(*args: Any) -> Any:
        written = real_write(*args)
        other = table.catalog.load_table(table.name())
        other.append(
            pa.table(
                {
                    "id": pa.array([500, 501], pa.int64()),
                    "name": ["a", "b"],
                    "v": pa.array([1, 2], pa.int64()),
                },
                schema=other.schema().as_arrow(),
            )
        )
        return written

    monkeypatch.setattr(compaction, "_write", write_then_append)
    assert compact_partition(table, (1,)).snapshot_id is not None

    table.refresh()
    state.update({500: ("a", 1), 501: ("b", 2)})
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
