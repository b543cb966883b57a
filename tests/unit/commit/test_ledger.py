"""icesink.commit.ledger: which batches, and which attempt of each, a sink committed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.table import Table

from icesink.commit.committer import Committer
from icesink.commit.ledger import (
    BatchRange,
    attempt_of_batch,
    committed_files,
    is_committed,
    last_commit,
    snapshot_of_attempt,
)
from tests.unit.commit_fixtures import FAST_RETRIES, SINK_ID, make_table, sink_config, write_attempt


@pytest.fixture()
def table(tmp_path: Path) -> Table:
    return make_table(sink_config(tmp_path))[1]


def test_batch_range() -> None:
    assert BatchRange.parse("7") == BatchRange(7, 7) and str(BatchRange(7, 7)) == "7"
    assert BatchRange.parse("7-12") == BatchRange(7, 12) and str(BatchRange(7, 12)) == "7-12"
    assert 7 in BatchRange(7, 12) and 12 in BatchRange(7, 12)
    assert 13 not in BatchRange(7, 12) and "8" not in BatchRange(7, 12)


def test_empty_table_has_committed_nothing(table: Table) -> None:
    assert last_commit(table, SINK_ID) is None
    assert not is_committed(table, SINK_ID, 0)
    assert attempt_of_batch(table, SINK_ID, 0) is None


def test_commit_records_every_batch_and_its_attempt(table: Table) -> None:
    staged = [write_attempt(table, b, f"a{b}", range(b * 10, b * 10 + 10)) for b in (3, 4)]
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(staged, BatchRange(3, 5))  # 5: an empty batch
    record = last_commit(table, SINK_ID)
    assert record is not None and record.last_batch_id == 5 and record.attempt == ""
    assert [is_committed(table, SINK_ID, b) for b in (4, 5, 6)] == [True, True, False]
    assert attempt_of_batch(table, SINK_ID, 3) == "a3" and attempt_of_batch(table, SINK_ID, 4) == "a4"
    assert attempt_of_batch(table, "other-sink", 3) is None
    assert snapshot_of_attempt(table, SINK_ID, 3, "a-different-one") is None
    assert committed_files(table, SINK_ID, 4, "a4") == {f.path for b in staged for f in b.files}


def test_ledger_falls_back_to_snapshots_when_the_marker_is_gone(table: Table) -> None:
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(
        [write_attempt(table, 2, "a2", range(5))], BatchRange(2, 2)
    )
    with table.transaction() as tx:
        tx.remove_properties(f"icesink.sink.{SINK_ID}.last-batch-id", f"icesink.sink.{SINK_ID}.last-attempt")
    record = last_commit(table, SINK_ID)
    assert record is not None and (record.last_batch_id, record.attempt) == (2, "a2")


def test_committed_files_of_an_expired_snapshot_are_unknown(table: Table) -> None:
    assert committed_files(table, SINK_ID, 0, "a0") is None
