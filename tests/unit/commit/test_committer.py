"""icesink.commit.committer: retries re-check the ledger, and no path deletes a file a reader may need."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange, attempt_of_batch
from icesink.errors import CommitConflictError, CommitError
from tests.unit.commit_fixtures import (
    FAST_RETRIES,
    SINK_ID,
    before_each_data_commit,
    concurrent_appends,
    data_files_on_disk,
    make_table,
    sink_config,
    sound_ids,
    write_attempt,
)


@pytest.fixture()
def catalog_and_table(tmp_path: Path) -> tuple[Catalog, Table]:
    return make_table(sink_config(tmp_path))


@pytest.fixture()
def sleeps() -> list[float]:
    """The waits of the committers given ``sleep=sleeps.append``, in seconds."""
    return []


def test_staged_commit_that_gives_up_keeps_every_file_and_does_not_sleep_after_the_last_try(
    catalog_and_table: tuple[Catalog, Table], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = catalog_and_table
    staged = [write_attempt(table, b, f"a{b}", range(b * 10, b * 10 + 10)) for b in range(3)]
    append, appended = concurrent_appends(table)
    before_each_data_commit(monkeypatch, catalog, append)
    with pytest.raises(CommitConflictError, match="stay staged"):
        Committer(table, SINK_ID, FAST_RETRIES, sleep=sleeps.append).commit_batches(
            staged, BatchRange(0, 2), durable=True
        )
    assert len(appended) == 3 * 3  # three tries, each lost to the other writer
    assert len(sleeps) == 2  # between tries only
    assert data_files_on_disk(table) >= {f.path for b in staged for f in b.files}


def test_commit_that_gives_up_deletes_files_nothing_else_holds(
    catalog_and_table: tuple[Catalog, Table], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = catalog_and_table
    batch = write_attempt(table, 0, "a0", range(10))
    append, appended = concurrent_appends(table)
    before_each_data_commit(monkeypatch, catalog, append)
    with pytest.raises(CommitConflictError, match="were deleted"):
        Committer(table, SINK_ID, FAST_RETRIES, sleep=sleeps.append).commit_batches(
            [batch], BatchRange(0, 0), durable=False
        )
    assert sound_ids(table) == sorted(appended)
    assert len(sleeps) == 2


def test_conflict_is_retried_and_commits_once(
    catalog_and_table: tuple[Catalog, Table], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = catalog_and_table
    batch = write_attempt(table, 0, "a0", range(10))
    append, appended = concurrent_appends(table)
    calls = itertools.count()
    before_each_data_commit(monkeypatch, catalog, lambda: append() if next(calls) == 0 else None)
    outcome = Committer(table, SINK_ID, FAST_RETRIES, sleep=sleeps.append).commit_batches(
        [batch], BatchRange(0, 0)
    )
    assert (outcome.attempts, outcome.conflicts, outcome.skipped_replay) == (2, 1, False)
    assert len(sleeps) == 1
    assert sound_ids(table) == sorted([*appended, *range(10)])


def test_retry_finds_the_batch_committed_by_another_attempt_and_deletes_only_its_own_files(
    catalog_and_table: tuple[Catalog, Table], sleeps: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = catalog_and_table
    ours = write_attempt(table, 0, "ours", range(10))
    theirs = write_attempt(table, 0, "theirs", range(10))
    other = Committer(
        type(catalog)(catalog.name, **catalog.properties).load_table(table.name()), SINK_ID, FAST_RETRIES
    )
    calls = itertools.count()
    before_each_data_commit(
        monkeypatch,
        catalog,
        lambda: other.commit_batches([theirs], BatchRange(0, 0)) if next(calls) == 0 else None,
    )
    outcome = Committer(table, SINK_ID, FAST_RETRIES, sleep=sleeps.append).commit_batches(
        [ours], BatchRange(0, 0)
    )
    assert outcome.skipped_replay and set(outcome.discarded_files) == {f.path for f in ours.files}
    assert sound_ids(table) == list(range(10))
    assert attempt_of_batch(table, SINK_ID, 0) == "theirs"


def test_replay_of_a_commit_that_landed_keeps_its_files(catalog_and_table: tuple[Catalog, Table]) -> None:
    _, table = catalog_and_table
    batches = [write_attempt(table, b, f"a{b}", range(b * 10, b * 10 + 10)) for b in range(2)]
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(batches, BatchRange(0, 1))
    # The response was lost: the staged batches are committed again.
    outcome = Committer(table, SINK_ID, FAST_RETRIES).commit_batches(batches, BatchRange(0, 1))
    assert outcome.skipped_replay and outcome.discarded_files == ()
    assert sound_ids(table) == list(range(20))


def test_staged_batches_already_committed_are_left_out_of_the_next_commit(
    catalog_and_table: tuple[Catalog, Table],
) -> None:
    _, table = catalog_and_table
    batches = [write_attempt(table, b, f"a{b}", range(b * 10, b * 10 + 10)) for b in range(3)]
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(batches[:2], BatchRange(0, 1))
    outcome = Committer(table, SINK_ID, FAST_RETRIES).commit_batches(batches, BatchRange(0, 2))
    assert not outcome.skipped_replay
    assert sound_ids(table) == list(range(30))  # batches 0-1 once
    assert [s.summary["icesink.batch-ids"] for s in table.snapshots() if s.summary] == ["0-1", "2"]


def test_commit_deletes_files_of_failed_tasks_it_did_not_take(
    catalog_and_table: tuple[Catalog, Table],
) -> None:
    _, table = catalog_and_table
    killed = write_attempt(table, 0, "a0", range(10), task_attempt=0)
    batch = write_attempt(table, 0, "a0", range(10), task_attempt=1)
    outcome = Committer(table, SINK_ID, FAST_RETRIES).commit_batches([batch], BatchRange(0, 0))
    assert set(outcome.discarded_files) == {f.path for f in killed.files}
    assert sound_ids(table) == list(range(10))


def test_unknown_outcome_keeps_the_files(
    catalog_and_table: tuple[Catalog, Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, table = catalog_and_table
    batch = write_attempt(table, 0, "a0", range(10))

    def fail() -> None:
        raise ConnectionError("catalog unreachable")

    before_each_data_commit(monkeypatch, catalog, fail)
    with pytest.raises(CommitError, match="unknown outcome"):
        Committer(table, SINK_ID, FAST_RETRIES).commit_batches([batch], BatchRange(0, 0), durable=False)
    assert data_files_on_disk(table) == {f.path for f in batch.files}


def test_inner_retries_of_pyiceberg_are_off_without_changing_the_table(
    catalog_and_table: tuple[Catalog, Table],
) -> None:
    _, table = catalog_and_table
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(
        [write_attempt(table, 0, "a0", range(3))], BatchRange(0, 0)
    )
    assert "commit.retry.num-retries" not in table.properties
    assert table.properties["icesink.sink.unit.last-batch-id"] == "0"
