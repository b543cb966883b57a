"""icesink.commit.recovery: crashed batch attempts settled against the ledger, one attempt's
files at a time."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from icesink._pyiceberg import list_files
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from icesink.commit.recovery import AttemptLog, AttemptRecord, attempt_location
from icesink.commit.state import StateFolder
from icesink.config import SinkConfig
from tests.unit.commit_fixtures import (
    FAST_RETRIES,
    SINK_ID,
    CountingFileIO,
    counted,
    data_files_on_disk,
    make_table,
    sink_config,
    sound_ids,
    write_attempt,
)


@pytest.fixture()
def config(tmp_path: Path) -> SinkConfig:
    return sink_config(tmp_path)


def begin(log: AttemptLog, table: Table, batch_id: int, attempt: str) -> AttemptRecord:
    prefix = f"{SINK_ID}-b{batch_id}-{attempt}"
    record = AttemptRecord(
        SINK_ID, batch_id, attempt, prefix, attempt_location(f"{table.location()}/data", prefix)
    )
    log.begin(record)
    return record


def test_records_live_in_the_state_folder_not_among_the_tables_files(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    record = begin(log, table, 0, "a0")
    assert log.open_attempts() == [record]
    warehouse = Path(config.catalog.plain_properties()["warehouse"].removeprefix("file://"))
    state = warehouse / "_icesink_state" / "db.t" / SINK_ID / "attempts"
    assert [p.name for p in state.iterdir()] == ["000000000000-a0.json"]
    table_files = [p for p in Path(table.location().removeprefix("file://")).rglob("*") if p.is_file()]
    assert all(p.name.endswith(".metadata.json") for p in table_files)
    log.end(0, "a0")
    assert log.open_attempts() == []


def test_attempt_never_committed_has_its_files_deleted(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    begin(log, table, 0, "crashed")
    batch = write_attempt(table, 0, "crashed", range(10))
    report = log.recover(table)
    assert report.attempts == 1
    assert set(report.deleted_files) == {f.path for f in batch.files} and report.kept_files == ()
    assert data_files_on_disk(table) == set() and log.open_attempts() == []


def test_attempt_whose_batch_another_attempt_committed_has_its_files_deleted(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    begin(log, table, 0, "crashed")
    crashed = write_attempt(table, 0, "crashed", range(10))
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches(
        [write_attempt(table, 0, "replay", range(10))], BatchRange(0, 0)
    )
    report = log.recover(table)
    assert set(report.deleted_files) == {f.path for f in crashed.files}
    assert sound_ids(table) == list(range(10))


def test_attempt_that_committed_keeps_its_files_but_not_those_of_failed_tasks(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    begin(log, table, 0, "a0")
    killed_task = write_attempt(table, 0, "a0", range(10), task_attempt=0)  # a task that died after writing
    batch = write_attempt(table, 0, "a0", range(10), task_attempt=1)  # its retry, which the commit took
    # The process dies after the commit, before it cleaned the attempt's folder up
    # (without a location, the committer does not look there).
    Committer(table, SINK_ID, FAST_RETRIES).commit_batches([replace(batch, location="")], BatchRange(0, 0))
    assert {f.path for f in killed_task.files} <= data_files_on_disk(table)
    report = log.recover(table)
    assert set(report.deleted_files) == {f.path for f in killed_task.files}
    assert sound_ids(table) == list(range(10))


def test_attempt_of_a_staged_batch_is_kept(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    begin(log, table, 0, "staged")
    batch = write_attempt(table, 0, "staged", range(10))
    report = log.recover(table, staged_attempts=frozenset({"staged"}))
    assert report == type(report)((), (), 1)
    assert data_files_on_disk(table) == {f.path for f in batch.files}


def test_attempt_whose_commit_expired_is_kept_and_reported(config: SinkConfig) -> None:
    _, table = make_table(config)
    log = AttemptLog.for_sink(config, table, SINK_ID)
    begin(log, table, 0, "old")
    old = write_attempt(table, 0, "old", range(5))
    committer = Committer(table, SINK_ID, FAST_RETRIES)
    committer.commit_batches([write_attempt(table, 1, "new", range(5, 10))], BatchRange(0, 1))
    # The ledger knows batch 0 is committed (marker at 1) but no longer by which attempt.
    report = log.recover(table)
    assert report.deleted_files == () and set(report.kept_files) == {f.path for f in old.files}


def test_record_of_an_earlier_version_is_moved_and_settled(config: SinkConfig) -> None:
    _, table = make_table(config)
    data = f"{table.location()}/data"
    batch = write_attempt(table, 0, "legacy", range(10))
    flat = f"{data}/{batch.files[0].path.rsplit('/', 1)[-1]}"  # earlier versions wrote into data/
    table.io.new_output(flat).create().write(table.io.new_input(batch.files[0].path).open().read())
    table.io.delete(batch.files[0].path)
    legacy = f"{table.location()}/metadata/icesink-attempts/{SINK_ID}/000000000000-legacy.json"
    record = {"sink_id": SINK_ID, "batch_id": 0, "attempt": "legacy", "file_prefix": f"{SINK_ID}-b0-legacy"}
    with table.io.new_output(legacy).create() as out:
        out.write(json.dumps({**record, "data_location": data}).encode())
    report = AttemptLog.for_sink(config, table, SINK_ID).recover(table)
    assert report.deleted_files == (flat,)
    assert data_files_on_disk(table) == set()
    assert list_files(table.io, f"{table.location()}/metadata/icesink-attempts") == []


def add_data_file_entries(table: Table, n: int) -> None:
    """Commit ``n`` tiny data files (entries of one row each, files on disk) in one snapshot."""
    folder = Path(table.location().removeprefix("file://"), "data", "bulk")
    folder.mkdir(parents=True)
    files = []
    for i in range(n):
        path = folder / f"f-{i:05d}.parquet"
        path.write_bytes(b"")
        files.append(
            DataFile.from_args(
                _table_format_version=table.format_version,
                content=DataFileContent.DATA,
                file_path=f"file://{path}",
                file_format=FileFormat.PARQUET,
                partition=Record(),
                record_count=1,
                file_size_in_bytes=1,
            )
        )
    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for data_file in files:
            append.append_data_file(data_file)


def recovery_requests(tmp_path: Path, table_files: int) -> tuple[int, int, int]:
    """(requests, entries listed) of settling one crashed attempt of a table of ``table_files`` files,
    and the requests one listing of the table's data folder would cost."""
    config = sink_config(tmp_path)
    _, table = make_table(config)
    add_data_file_entries(table, table_files)
    io = CountingFileIO(dict(table.io.properties))
    log = AttemptLog(StateFolder(io, str(tmp_path / "state")), io, SINK_ID)
    begin(log, table, 0, "crashed")
    crashed = write_attempt(table, 0, "crashed", range(30))
    requests, listed = counted(io, lambda: log.recover(table))
    assert not {f.path for f in crashed.files} & data_files_on_disk(table)  # settled: deleted
    whole_folder, _ = counted(io, lambda: list_files(io, f"{table.location()}/data"))
    return requests, listed, whole_folder


def test_recovery_of_one_attempt_costs_the_same_on_a_table_of_100_or_10000_files(tmp_path: Path) -> None:
    small = recovery_requests(tmp_path / "small", 100)
    large = recovery_requests(tmp_path / "large", 10_000)
    # List the records, read the one, list the attempt's folder, delete its file and the record
    # (and look for records of earlier versions: one more listing).
    assert large[0] == small[0] <= 7, (small, large)
    assert large[1] == small[1] <= 3, (small, large)  # entries listed: the record and the attempt's file
    assert large[2] >= 10 > small[2]  # the counter sees what listing the data folder would cost
