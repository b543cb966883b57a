"""icesink.upsert.row_delta: a refused row delta is rebuilt and retried, with a wait between attempts only."""

from __future__ import annotations

import itertools
from pathlib import Path

import pyarrow as pa
import pytest

from icesink.commit.ledger import BatchRange, is_committed
from icesink.config import CommitConfig
from icesink.errors import CommitConflictError
from icesink.upsert.row_delta import RowDeltaCommitter
from tests.support.upserts import create_table, rows_of, sql_catalog, write_data_files
from tests.unit.commit_fixtures import before_each_data_commit, concurrent_appends

RETRIES = CommitConfig(retries=2, min_wait_ms=1, max_wait_ms=4)
ROWS = pa.table({"id": pa.array(range(10), pa.int64()), "name": [f"n{i}" for i in range(10)], "v": range(10)})


def test_row_delta_that_gives_up_does_not_sleep_after_the_last_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create_table(sql_catalog(tmp_path))
    files = write_data_files(table, ROWS, "b0")
    append, appended = concurrent_appends(table)
    before_each_data_commit(monkeypatch, table.catalog, append)  # every attempt loses the race
    sleeps: list[float] = []
    committer = RowDeltaCommitter(table, "s1", RETRIES, sleep=sleeps.append)
    with pytest.raises(CommitConflictError, match="after 3 attempts"):
        committer.commit(files, [], None, BatchRange(0, 0), {0: "a0"})
    assert len(appended) == 3 * 3  # three attempts, each refused
    assert len(sleeps) == 2  # between the attempts, never after the last
    table.refresh()
    assert sorted(rows_of(table.scan().to_arrow())) == sorted(appended)
    assert not is_committed(table, "s1", 0)


def test_row_delta_refused_once_is_committed_after_one_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = create_table(sql_catalog(tmp_path))
    files = write_data_files(table, ROWS, "b0")
    append, appended = concurrent_appends(table)
    calls = itertools.count()
    before_each_data_commit(monkeypatch, table.catalog, lambda: append() if next(calls) == 0 else None)
    sleeps: list[float] = []
    outcome = RowDeltaCommitter(table, "s1", RETRIES, sleep=sleeps.append).commit(
        files, [], None, BatchRange(0, 0), {0: "a0"}
    )
    assert (outcome.attempts, outcome.conflicts, outcome.skipped_replay) == (2, 1, False)
    assert len(sleeps) == 1
    table.refresh()
    assert sorted(rows_of(table.scan().to_arrow())) == sorted([*appended, *range(10)])
    assert is_committed(table, "s1", 0)
