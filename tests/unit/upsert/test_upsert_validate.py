"""The row delta's conflict check against concurrent commits of the batch's keys (SQLite catalog, no Spark).

Two upserting sinks on one table, each with its own ledger: B commits inside A's commit
(the ``commit.before`` failpoint), so A's lookup planned from a snapshot without B's rows.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import Table

from icesink import failpoints
from icesink.upsert.lookup import LookupResult, LookupSpec, run_lookup_locally
from icesink.upsert.messages import LookupTask
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import (
    State,
    UpsertDriver,
    changes,
    create_table,
    expected_state,
    rows_of,
    sql_catalog,
)


def _inserts(keys: range, name: str, seq: int = 0) -> pa.Table:
    return changes(*[(k, f"{name}{k}", k, "c", seq) for k in keys])


def _read_back(table: Table) -> pa.Table:
    table.refresh()
    return table.scan().to_arrow()


def _inside_commit(work: Any) -> None:
    """Arm ``commit.before`` so that ``work`` runs (once) between the next commit's build and its send."""
    failpoints.arm("commit.before", "call", call=lambda _point: work())


@pytest.fixture(autouse=True)
def _disarm() -> Any:
    yield
    failpoints.disarm_all()


def test_two_upserters_inserting_the_same_new_keys_store_each_key_once(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    a = UpsertDriver(table, sink_id="A")
    b = UpsertDriver(table.catalog.load_table(table.name()), sink_id="B")
    state: State = {}
    for round_no in range(2):
        keys = range(round_no * 100, round_no * 100 + 100)
        mine, theirs = _inserts(keys, "a", round_no), _inserts(keys, "b", round_no)
        _inside_commit(lambda theirs=theirs: b.apply(theirs))
        outcome = a.apply(mine)
        expected_state(state, theirs)
        expected_state(state, mine)  # A commits last: its rows are the ones kept
        rows = _read_back(table)
        ids = rows.column("id").to_pylist()
        assert (len(ids), len(set(ids))) == (len(state), len(state)), f"round {round_no}: keys stored twice"
        assert rows_of(rows) == state
        assert outcome.redos == 1  # B's new rows of A's keys: A's lookup redone, B's rows deleted
    assert rows_of(duckdb_read(table.metadata_location)) == state  # another engine reads the same


def test_concurrent_rows_of_other_keys_redo_nothing_and_bounds_spare_the_reads(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    a = UpsertDriver(table, sink_id="A")
    b = UpsertDriver(table.catalog.load_table(table.name()), sink_id="B")
    state: State = {}
    # B's keys are above A's in every bucket: the files' bounds exclude A's keys, nothing is read
    _inside_commit(lambda: b.apply(_inserts(range(1000, 1100), "b")))
    outcome = a.apply(_inserts(range(100), "a"))
    expected_state(state, _inserts(range(1000, 1100), "b"))
    expected_state(state, _inserts(range(100), "a"))
    check = outcome.commit.key_check
    assert outcome.redos == 0 and check is not None
    assert (check.files_added, check.files_read, check.files_with_keys) == (4, 0, 0)
    # B's keys interleave with A's (bounds overlap), none equal: the files are read, no redo
    _inside_commit(lambda: b.apply(_inserts(range(101, 301, 2), "b")))
    outcome = a.apply(_inserts(range(100, 300, 2), "a"))
    expected_state(state, _inserts(range(101, 301, 2), "b"))
    expected_state(state, _inserts(range(100, 300, 2), "a"))
    check = outcome.commit.key_check
    assert outcome.redos == 0 and check is not None
    assert check.files_added == 4 and check.files_read == 4 and check.files_with_keys == 0
    assert rows_of(_read_back(table)) == state


def test_two_upserters_in_threads_at_once_never_store_a_key_twice(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    drivers = [UpsertDriver(table.catalog.load_table(table.name()), sink_id=s) for s in ("A", "B")]
    barrier = threading.Barrier(2, timeout=120)
    errors: list[BaseException] = []

    def run(driver: UpsertDriver, name: str) -> None:
        try:
            for round_no in range(4):
                barrier.wait()  # both start each round's batch of the same new keys together
                driver.apply(_inserts(range(round_no * 50, round_no * 50 + 50), name, round_no))
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(d, n)) for d, n in zip(drivers, "ab", strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    rows = _read_back(table)
    ids = rows.column("id").to_pylist()
    assert sorted(ids) == list(range(200))  # every key once


def test_a_plain_append_of_a_batch_key_by_another_engine_is_deleted_by_the_redone_lookup(
    tmp_path: Path,
) -> None:
    table = create_table(sql_catalog(tmp_path))
    a = UpsertDriver(table, sink_id="A")
    a.apply(_inserts(range(50), "a"))
    other = table.catalog.load_table(table.name())
    appended = pa.table(
        {"id": pa.array([7, 70], pa.int64()), "name": ["x7", "x70"], "v": pa.array([0, 0], pa.int64())},
        schema=other.schema().as_arrow(),
    )
    _inside_commit(lambda: other.append(appended))  # an "append" snapshot: key 7 updated, 70 inserted
    outcome = a.apply(changes((7, "a7-v2", 2, "u", 1), (70, "a70", 70, "c", 1)))

    state: State = {}
    expected_state(state, _inserts(range(50), "a"))
    expected_state(state, changes((7, "a7-v2", 2, "u", 1), (70, "a70", 70, "c", 1)))
    assert rows_of(_read_back(table)) == state  # one row of 7 and of 70, A's
    assert outcome.redos == 1


def test_a_rollback_past_the_lookups_snapshot_redoes_the_lookup(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    a = UpsertDriver(table, sink_id="A")
    b = UpsertDriver(table.catalog.load_table(table.name()), sink_id="B")
    a.apply(_inserts(range(50), "a"))
    table.refresh()
    loaded = table.metadata.current_snapshot_id
    assert loaded is not None
    b.apply(_inserts(range(100, 110), "b"))  # A's next lookup plans on this snapshot

    def roll_back_then_insert() -> None:
        other = table.catalog.load_table(table.name())
        other.manage_snapshots().rollback_to_snapshot(loaded).commit()
        b.apply(_inserts(range(50, 60), "b", 1))  # on the rolled-back branch: history A cannot walk

    _inside_commit(roll_back_then_insert)
    outcome = a.apply(_inserts(range(50, 60), "a", 1))

    assert rows_of(_read_back(table)) == {k: (f"a{k}", k) for k in range(60)}  # B's 100-109 rolled back
    assert outcome.redos == 1


def test_a_file_of_a_partition_spec_added_between_two_attempts_is_checked_too(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    UpsertDriver(table, sink_id="loader").apply(_inserts(range(0, 100, 2), "a"))
    b = UpsertDriver(table.catalog.load_table(table.name()), sink_id="B")

    def evolve_then_append(_point: str) -> None:  # between A's two attempts: a new spec, A's key 10
        other = table.catalog.load_table(table.name())
        with other.update_spec() as spec:
            spec.add_identity("v")
        row = {"id": pa.array([10], pa.int64()), "name": ["x10"], "v": pa.array([0], pa.int64())}
        other.append(pa.table(row, schema=other.schema().as_arrow()))

    def lookup_then_b_commits(tasks: list[LookupTask], spec: LookupSpec) -> LookupResult:
        result = run_lookup_locally(tasks, spec)
        if not b_committed:  # B's odd keys: read by A's first check (none is A's), with the spec of then
            b.apply(_inserts(range(1, 101, 2), "b"))
            b_committed.append(True)
            failpoints.arm("commit.before", "call", call=evolve_then_append)
        return result

    b_committed: list[bool] = []
    outcome = UpsertDriver(table, lookup_then_b_commits, "A").apply(changes((10, "a10-v2", 10, "u", 1)))

    state: State = {}
    for batch in (_inserts(range(0, 100, 2), "a"), _inserts(range(1, 101, 2), "b")):
        expected_state(state, batch)
    expected_state(state, changes((10, "a10-v2", 10, "u", 1)))
    assert rows_of(_read_back(table)) == state
    assert outcome.redos == 1
