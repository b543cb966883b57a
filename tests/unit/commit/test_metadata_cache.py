"""Commits on the metadata in hand (SQL catalog), read back fresh by pyiceberg and by DuckDB."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import SetPropertiesUpdate, update_table_metadata

from icesink import catalog as catalogs
from icesink._pyiceberg import updated_metadata
from icesink._pyiceberg.sql import sql_commit_table
from icesink.commit import metadata_cache
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from icesink.commit.snapshot import SnapshotProducer
from icesink.commit.staging import StagedBatch
from tests.support.duckdb_reader import read_iceberg_with_duckdb
from tests.unit.commit_fixtures import (
    FAST_RETRIES,
    SINK_ID,
    TABLE,
    before_each_data_commit,
    concurrent_appends,
    make_table,
    sink_config,
    write_attempt,
)

KEPT = 5  # write.metadata.previous-versions-max of these tables


def table_keeping(tmp_path: Path, delete_after_commit: bool) -> tuple[Catalog, Table]:
    catalog, table = make_table(sink_config(tmp_path))
    with table.transaction() as tx:
        tx.set_properties(
            {
                "write.metadata.previous-versions-max": str(KEPT),
                "write.metadata.delete-after-commit.enabled": str(delete_after_commit).lower(),
            }
        )
    return catalog, table


def commit_batches(committer: Committer, batches: range) -> list[StagedBatch]:
    staged = []
    for b in batches:
        batch = write_attempt(committer.table, b, f"a{b}", range(b * 10, b * 10 + 10))
        committer.commit_batches([batch], BatchRange(b, b))
        staged.append(batch)
    return staged


def fresh(catalog: Catalog) -> Table:
    """The table loaded by pyiceberg through a catalog of its own (nothing in hand)."""
    return type(catalog)(catalog.name, **catalog.properties).load_table(TABLE)


def ids_read_by_both(table: Table) -> list[int]:
    ours = sorted(table.scan().to_arrow().column("id").to_pylist())
    duck = sorted(read_iceberg_with_duckdb(table.metadata_location).column("id").to_pylist())
    assert ours == duck
    return ours


def metadata_files(table: Table) -> set[str]:
    folder = Path(table.location().removeprefix("file://"), "metadata")
    return {f"file://{p}" for p in folder.glob("*.metadata.json")}


def version_of(location: str) -> int:
    return int(location.rsplit("/", 1)[-1].split("-", 1)[0])


@pytest.mark.parametrize("delete_after_commit", [True, False])
def test_batches_committed_on_the_metadata_in_hand_are_read_back_whole(
    tmp_path: Path, delete_after_commit: bool
) -> None:
    catalog, table = table_keeping(tmp_path, delete_after_commit)
    first_version = version_of(table.metadata_location)
    committer = Committer(table, SINK_ID, FAST_RETRIES)
    commit_batches(committer, range(12))

    loaded = fresh(catalog)
    assert loaded.metadata == committer.table.metadata
    assert ids_read_by_both(loaded) == list(range(120))
    assert version_of(loaded.metadata_location) == first_version + 12  # one file per commit, numbered
    assert loaded.metadata.properties[f"icesink.sink.{SINK_ID}.last-batch-id"] == "11"
    snapshots = loaded.snapshots()
    assert [e.snapshot_id for e in loaded.metadata.snapshot_log] == [s.snapshot_id for s in snapshots]
    assert all(s.parent_snapshot_id == p.snapshot_id for p, s in itertools.pairwise(snapshots))
    assert [s.sequence_number for s in snapshots] == list(range(1, 13))
    log = [entry.metadata_file for entry in loaded.metadata.metadata_log]
    assert [version_of(f) for f in log] == list(range(first_version + 7, first_version + 12))  # KEPT
    assert loaded.metadata.last_updated_ms >= snapshots[-1].timestamp_ms
    if delete_after_commit:
        assert metadata_files(loaded) == {*log, loaded.metadata_location}
    else:
        assert len(metadata_files(loaded)) == first_version + 13


def test_updates_applied_without_the_deep_copy_equal_pyicebergs(tmp_path: Path) -> None:
    _, table = table_keeping(tmp_path, True)
    commit_batches(Committer(table, SINK_ID, FAST_RETRIES), range(3))
    producer = SnapshotProducer(table, Operation.APPEND)
    message = write_attempt(table, 9, "x", range(3)).files[0]
    producer.add_file(Committer(table, SINK_ID, FAST_RETRIES)._data_file(message))
    pending = producer.build(table.metadata)
    location = table.metadata_location
    ours = updated_metadata(table.metadata, pending.updates, location)
    assert ours == update_table_metadata(table.metadata, pending.updates, metadata_location=location)
    marker = (SetPropertiesUpdate(updates={"k": "v"}),)
    ours = updated_metadata(table.metadata, marker, location)
    theirs = update_table_metadata(table.metadata, marker, metadata_location=location)
    assert ours.model_copy(update={"last_updated_ms": 0}) == theirs.model_copy(update={"last_updated_ms": 0})
    assert updated_metadata(table.metadata, (), location) is table.metadata


def test_another_writer_between_refresh_and_swap_fails_the_swap_and_the_retry_keeps_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = table_keeping(tmp_path, True)
    committer = Committer(table, SINK_ID, FAST_RETRIES, sleep=lambda _: None)
    commit_batches(committer, range(2))
    append, appended = concurrent_appends(table)
    calls = itertools.count()
    before_each_data_commit(monkeypatch, catalog, lambda: append() if next(calls) == 0 else None)
    batch = write_attempt(table, 2, "a2", range(20, 30))
    outcome = committer.commit_batches([batch], BatchRange(2, 2))

    assert (outcome.attempts, outcome.conflicts) == (2, 1)
    loaded = fresh(catalog)
    assert ids_read_by_both(loaded) == sorted([*appended, *range(30)])
    assert [s.summary.operation for s in loaded.snapshots()[-2:]] == [Operation.APPEND] * 2  # type: ignore[union-attr]
    assert metadata_files(loaded) == {
        *(e.metadata_file for e in loaded.metadata.metadata_log),
        loaded.metadata_location,
    }  # the refused attempt's metadata file is gone too


def test_stale_metadata_is_refused_and_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    catalog, table = table_keeping(tmp_path, True)
    append, appended = concurrent_appends(table)
    append()
    before = fresh(catalog)
    with pytest.raises(CommitFailedException, match="updated by another process"):
        sql_commit_table(table, (), (SetPropertiesUpdate(updates={"k": "v"}),))
    after = fresh(catalog)
    assert after.metadata_location == before.metadata_location and "k" not in after.properties
    assert metadata_files(after) == metadata_files(before)
    assert ids_read_by_both(after) == sorted(appended)


def test_metadata_is_parsed_only_when_another_writer_moved_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = table_keeping(tmp_path, True)
    parsed: list[str] = []
    real = FromInputFile.table_metadata

    def counting(input_file: Any, *args: Any) -> Any:
        parsed.append(input_file.location)
        return real(input_file, *args)

    monkeypatch.setattr(FromInputFile, "table_metadata", staticmethod(counting))
    committer = Committer(catalogs.load_table(catalog, TABLE) or table, SINK_ID, FAST_RETRIES)
    assert len(parsed) == 1  # the first load
    for b in range(4):  # as the sink does: load the table, commit the batch
        committer.table = catalogs.load_table(catalog, TABLE) or table
        commit_batches(committer, range(b, b + 1))
    assert parsed[1:] == []

    append, appended = concurrent_appends(table)
    append()
    parsed.clear()
    moved = catalogs.load_table(catalog, TABLE)
    assert moved is not None and len(parsed) == 1  # the sink's load of what the other writer committed
    metadata_cache.refresh(committer.table)  # the sink's other table object: the new metadata is in hand
    assert len(parsed) == 1 and committer.table.metadata_location == moved.metadata_location
    commit_batches(committer, range(4, 5))
    assert len(parsed) == 1
    assert ids_read_by_both(fresh(catalog)) == sorted([*appended, *range(50)])
