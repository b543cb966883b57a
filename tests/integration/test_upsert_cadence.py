"""Upserts with the commit cadence (``commit.max-batches``): staged batches, one row delta each group.

Keys inserted, updated and deleted across the batches of one staged group and across groups;
faults between a batch's stage and its commit and before the commit, with a restart (a new
sink object, same sink id). Every table is read back through pyiceberg and DuckDB. A
concurrent writer between stage and commit: ``tests/unit/batch/test_staged_row_deltas.py``.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink import IcebergSink, failpoints
from icesink.failpoints import InjectedFault
from tests.integration.test_crash_recovery import job_arguments, job_result, run_job
from tests.integration.test_upsert_sink import BATCHES as SINK_BATCHES
from tests.integration.test_upsert_sink import assert_reads, upsert_options, valid_changes
from tests.support.tables import catalog_from_options
from tests.support.upserts import CHANGE_BATCHES, State, changes, expected_state

BATCHES = [
    *CHANGE_BATCHES,  # 0-2 one staged group, 3 opens the next
    # key 5 (updated in batch 3 of this group) deleted; key 1 (re-inserted in the first group) updated
    changes((5, None, None, "d", 8), (1, "b1", 11, "u", 8), (60, "n60", 60, "c", 8)),
    # key 5 back, key 60 (inserted in batch 4, same group) updated, key 2 deleted
    changes((5, "five", 5, "c", 9), (60, "u60", 600, "u", 9), (2, None, None, "d", 9)),
]


def _sink(catalog_options: dict[str, str]) -> IcebergSink:
    return IcebergSink.from_options(upsert_options(catalog_options, **{"commit.max-batches": "3"}))


def _delete_files_per_snapshot(table: Table) -> dict[str, int]:
    """Position delete files each snapshot of the sink added, by its batch ids."""
    added: dict[str, int] = {}
    for snapshot in table.snapshots():
        summary = snapshot.summary
        if summary is None or "icesink.batch-ids" not in summary:
            continue
        entries = [
            e
            for m in snapshot.manifests(table.io)
            if m.added_snapshot_id == snapshot.snapshot_id
            for e in m.fetch_manifest_entry(table.io)
            if e.snapshot_id == snapshot.snapshot_id
        ]
        added[str(summary["icesink.batch-ids"])] = sum(
            e.data_file.content == DataFileContent.POSITION_DELETES for e in entries
        )
    return added


def test_staged_upserts_with_faults_between_stage_and_commit_commit_each_change_once(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    state: State = {}
    sink = _sink(catalog_options)
    for batch_id, batch in enumerate(BATCHES[:4]):
        sink(spark.createDataFrame(batch), batch_id)
        expected_state(state, batch)
        if batch_id == 1:  # staged, not committed
            assert sink.catalog.load_table("db.items").current_snapshot() is None
    try:
        failpoints.arm("stage", "raise")  # batch 4 written, neither looked up nor staged
        with pytest.raises(InjectedFault):
            sink(spark.createDataFrame(BATCHES[4]), 4)
        sink = _sink(catalog_options)  # restart: staged batch 3 reloaded, batch 4 replayed
        sink(spark.createDataFrame(BATCHES[4]), 4)
        expected_state(state, BATCHES[4])
        failpoints.arm("commit.before", "raise")  # batch 5 staged, the group's commit fails
        with pytest.raises(InjectedFault):
            sink(spark.createDataFrame(BATCHES[5]), 5)
    finally:
        failpoints.disarm_all()
    expected_state(state, BATCHES[5])  # staged durably before the commit failed
    sink = _sink(catalog_options)  # restart: batches 3-5 reloaded
    sink(spark.createDataFrame(BATCHES[5]), 5)  # a replay of a staged batch: skipped
    sink.flush()
    table = sink.catalog.load_table("db.items")
    assert_reads(table, state)  # every referenced file exists, none left over
    assert state[5] == ("five", 5) and state[60] == ("u60", 600) and 2 not in state and state[1] == ("b1", 11)
    per_snapshot = _delete_files_per_snapshot(table)
    assert list(per_snapshot) == ["0-2", "3-5"]  # snapshots = batches / 3
    # at most one delete file per partition (4 buckets) per staged batch; the first batch has none
    assert 0 < per_snapshot["0-2"] <= 4 * 2 and 0 < per_snapshot["3-5"] <= 4 * 3
    sink.close()


@pytest.mark.faults_full
def test_sigkill_after_a_staged_upsert_then_restart_applies_every_change_once(
    tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    folder = tmp_path / "input"
    folder.mkdir()
    for n, batch in enumerate(SINK_BATCHES):  # one file per micro-batch, in order of modification time
        path = folder / f"part-{n:03d}.parquet"
        pq.write_table(batch, path)
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))
    options = upsert_options(catalog_options, **{"commit.max-batches": "3"})
    options.pop("sink-id")  # the query's id: stable across the restart from the checkpoint
    common = job_arguments(folder, tmp_path / "ck", options)

    crashed = run_job(*common, "--crash-at", "after-stage", "--crash-batch", "1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    table = catalog_from_options(options).load_table("db.items")
    assert table.snapshots() == []  # batches 0 and 1 staged, with batch 1's position deletes
    assert any("-deletes-" in p.name for p in tmp_path.rglob("*.parquet"))

    restarted = run_job(*common)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert job_result(restarted)["icesink_replays_skipped_total"] == 1  # batch 1 replayed, recognised
    state: State = {}
    for batch in SINK_BATCHES:
        expected_state(state, valid_changes(batch))
    table = catalog_from_options(options).load_table("db.items")
    assert_reads(table, state)  # no referenced file missing, none left over
    assert list(_delete_files_per_snapshot(table)) == ["0-2", "3"]
