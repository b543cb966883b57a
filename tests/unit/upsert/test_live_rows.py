"""A compaction's live rows (icesink.upsert.live_rows), and each delete file read once a maintenance run.

On upserted SQLite tables written driver-side: the rows a compaction rewrites equal, row for row,
what pyiceberg and DuckDB read from the same files before, for files in the table's schema (read as
they are) and files written before a column was added (read through pyiceberg's projection).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table
from pyiceberg.types import StringType

from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance.planning import Rewrite
from icesink.maintenance.rewrite_run import rewrite_partitions
from icesink.upsert.compaction import compact_partition
from icesink.upsert.delete_merge import DeletePositions
from icesink.upsert.live_rows import live_rows
from icesink.upsert.rewrite_files import files_by_partition
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

ALL_BUCKETS = [(b,) for b in range(BUCKETS)]
TARGET = 64 * 1024 * 1024


def _table(tmp_path: Path, batches: int) -> tuple[Table, UpsertDriver, State]:
    """40 keys inserted, then ``batches`` batches updating every other key and deleting a few."""
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: State = {}
    for n in range(batches + 1):
        rows = [(i, f"v{n}-{i}", n, "c" if n == 0 else "u", n) for i in range(n % 2, 40, 2)]
        deletes = [(i, None, None, "d", n) for i in range(n, 40, 11)] if n else []
        batch = changes(*rows, *deletes)
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()
    return table, driver, state


def _sorted(rows: pa.Table) -> list[dict[str, Any]]:
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def _all_live_rows(table: Table) -> pa.Table:
    parts = []
    for files in files_by_partition(table, set(ALL_BUCKETS)).values():
        parts.append(live_rows(table, files.data, files.index, DeletePositions.read(table, files.deletes)))
    return pa.concat_tables(parts)


def test_the_rows_a_compaction_rewrites_are_those_readers_see(tmp_path: Path) -> None:
    table, _, state = _table(tmp_path, 6)
    before = table.scan().to_arrow()

    rows = _all_live_rows(table)

    assert _sorted(rows) == _sorted(before)
    assert _sorted(rows.select(["id", "name", "v"])) == _sorted(duckdb_read(table.metadata_location))
    assert rows_of(rows) == state
    for bucket in ALL_BUCKETS:
        compact_partition(table, bucket, TARGET)
    table.refresh()
    assert _sorted(table.scan().to_arrow()) == _sorted(before)
    assert rows_of(duckdb_read(table.metadata_location)) == state


def test_files_written_before_a_column_was_added_read_with_it_empty(tmp_path: Path) -> None:
    table, _, state = _table(tmp_path, 4)
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table.refresh()
    before = table.scan().to_arrow()

    rows = _all_live_rows(table)

    assert rows.column_names == ["id", "name", "v", "note"]
    assert rows.column("note").null_count == rows.num_rows
    assert _sorted(rows) == _sorted(before) and rows_of(rows) == state
    for bucket in ALL_BUCKETS:
        compact_partition(table, bucket, TARGET)
    table.refresh()
    assert _sorted(table.scan().to_arrow()) == _sorted(before)
    assert rows_of(duckdb_read(table.metadata_location)) == state


def test_a_maintenance_run_reads_each_delete_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every partition examined for rewriting, then merged where not rewritten: the examination's
    read serves the rewrite and the merge."""
    table, _, state = _table(tmp_path, 5)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    delete_files = {
        e.data_file.file_path
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io, discard_deleted=True)
        if e.data_file.content != DataFileContent.DATA
    }
    opened: Counter[str] = Counter()
    new_input = PyArrowFileIO.new_input

    def counting(io: PyArrowFileIO, location: str) -> PyArrowFile:
        opened[location] += 1
        return new_input(io, location)

    monkeypatch.setattr(PyArrowFileIO, "new_input", counting)
    config = MaintenanceConfig(max_delete_files=2)
    rewrites = [Rewrite(b, full=False) for b in ALL_BUCKETS]

    run = rewrite_partitions(table, rewrites, ALL_BUCKETS, config, TARGET, lambda: True)

    assert run.compacted and run.snapshot_id is not None
    assert {p: opened[p] for p in delete_files} == dict.fromkeys(delete_files, 1)
    monkeypatch.undo()
    table.refresh()
    assert rows_of(table.scan().to_arrow()) == state
    assert rows_of(duckdb_read(table.metadata_location)) == state
