"""icesink.commit.manifest_entries: the entries kept are those of the manifest, read once, within a bound."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyiceberg.table import Table

from icesink.commit import manifest_entries
from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance.scheduler import Budget, TableMaintenance
from tests.support.upserts import UpsertDriver, changes, create_table, expected_state, rows_of, sql_catalog


@pytest.fixture(autouse=True)
def fresh_entries() -> Iterator[None]:
    manifest_entries.forget_all()
    yield
    manifest_entries.forget_all()


def _upserted(tmp_path: Path, batches: int) -> tuple[Table, dict[int, tuple[str | None, int | None]]]:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table)
    state: dict[int, tuple[str | None, int | None]] = {}
    for n in range(batches):
        batch = changes(*[(i, f"v{n}-{i}", n, "c" if n == 0 else "u", n) for i in range(40)])
        driver.apply(batch)
        expected_state(state, batch)
    table.refresh()
    return table, state


def _entries(table: Table) -> list[tuple[str, int, int | None]]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return sorted(
        (e.data_file.file_path, e.status.value, e.sequence_number)
        for m in snapshot.manifests(table.io)
        for e in manifest_entries.live_entries(table.io, m)
    )


def test_the_entries_kept_are_the_manifests_live_ones_read_once(tmp_path: Path) -> None:
    table, _ = _upserted(tmp_path, 3)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = snapshot.manifests(table.io)
    for manifest in manifests:
        kept = manifest_entries.live_entries(table.io, manifest)
        read = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        assert [(e.data_file.file_path, e.status, e.sequence_number) for e in kept] == [
            (e.data_file.file_path, e.status, e.sequence_number) for e in read
        ]
        assert manifest_entries.live_entries(table.io, manifest) is kept  # not read again
    assert manifest_entries.held() == (
        len(manifests),
        sum(len(m.fetch_manifest_entry(table.io)) for m in manifests),
    )


def test_a_manifest_past_the_bound_is_read_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, _ = _upserted(tmp_path, 2)
    monkeypatch.setattr(manifest_entries, "MAX_ENTRIES", 1)
    snapshot = table.current_snapshot()
    assert snapshot is not None
    big = next(m for m in snapshot.manifests(table.io) if len(m.fetch_manifest_entry(table.io)) > 1)
    first = manifest_entries.live_entries(table.io, big)
    assert manifest_entries.live_entries(table.io, big) is not first
    assert manifest_entries.held() == (0, 0)


def test_rewrites_planned_from_kept_entries_read_back_right(tmp_path: Path) -> None:
    """Maintenance after maintenance: each run's plan and commit see the files the last one left."""
    table, state = _upserted(tmp_path, 4)
    config = MaintenanceConfig(min_delete_files=3, partitions_per_batch=1)
    maintenance = TableMaintenance("db.items")
    before = _entries(table)
    for _ in range(4):
        maintenance.run(table, config, 64 * 1024 * 1024, Budget(60), lambda: lambda path: False)
        table.refresh()
        assert rows_of(table.scan().to_arrow()) == state
    assert _entries(table) != before
    manifest_entries.forget_all()
    fresh = _entries(table)  # read from storage again: the same files
    manifest_entries.forget_all()
    assert fresh == _entries(table)
