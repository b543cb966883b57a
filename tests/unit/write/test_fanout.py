from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from icesink.write.fanout import FanoutWriter
from icesink.write.parquet import ParquetFileWriter
from icesink.write.rolling import RollingFileWriter
from tests.unit.writer_fixtures import FileFactory, batch

KiB = 1024
MiB = 1024 * KiB


@pytest.mark.parametrize("close_threads", [1, 2])
def test_interleaved_partitions_keep_their_writers(tmp_path: Path, close_threads: int) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=MiB)
    fanout = FanoutWriter(
        lambda p: RollingFileWriter(lambda: factory(p), 64 * MiB, factory.estimator),
        256 * MiB,
        close_threads=close_threads,
    )
    for i in range(30):
        fanout.write((i % 3,), batch(i * 100, 100))
    fanout.close()
    messages = fanout.result()
    assert sorted(m.partition for m in messages) == [(0,), (1,), (2,)]  # one file per value
    assert fanout.open_writers_peak == 3
    assert sum(m.record_count for m in messages) == 3000
    for m in messages:  # each file holds exactly its value's rows, whichever thread closed it
        file_ids = pq.read_table(m.path.removeprefix("file://")).column("id").to_pylist()
        assert sorted(file_ids) == [i for i in range(3000) if (i // 100) % 3 == m.partition[0]]
        assert m.record_count == len(file_ids)


def test_budget_closes_largest_file_and_loses_nothing(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * MiB)  # never flushes by size
    budget = 2 * MiB
    fanout = FanoutWriter(
        lambda p: RollingFileWriter(lambda: factory(p), 64 * MiB, factory.estimator), budget
    )
    for i in range(200):
        fanout.write((i % 10,), batch(i * 1000, 1000))
        assert fanout.buffered_bytes() <= budget
    fanout.close()
    messages = fanout.result()
    assert fanout.budget_closes > 0
    assert len(messages) > 10  # partitions continued in new files
    ids = sorted(
        i for m in messages for i in pq.read_table(m.path.removeprefix("file://")).column("id").to_pylist()
    )
    assert ids == list(range(200_000))
    for m in messages:
        part = m.partition[0]
        file_ids = pq.read_table(m.path.removeprefix("file://")).column("id").to_pylist()
        assert all((i // 1000) % 10 == part for i in file_ids)


def test_many_values_of_a_few_rows_count_their_batches_against_the_budget(tmp_path: Path) -> None:
    # 3,000 values of 2 rows each: about 200 KiB of Arrow data, far under the budget, but
    # each value's writer holds a batch, and those cost more than their rows.
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * MiB)
    budget = MiB
    fanout = FanoutWriter(
        lambda p: RollingFileWriter(lambda: factory(p), 64 * MiB, factory.estimator), budget
    )
    for i in range(3000):
        fanout.write((i,), batch(2 * i, 2))
        assert fanout.buffered_bytes() <= budget
    data_bytes = sum(batch(2 * i, 2).nbytes for i in range(3000))
    assert data_bytes < budget / 4
    assert fanout.budget_closes > 0  # closed for what the batches hold, not for their rows
    fanout.close()
    messages = fanout.result()
    assert len(messages) == 3000  # one file per value: none lost, none split
    for m in messages:
        file_ids = pq.read_table(m.path.removeprefix("file://")).column("id").to_pylist()
        assert file_ids == [2 * m.partition[0], 2 * m.partition[0] + 1]


def test_abort_reports_closed_files(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=16 * KiB)
    fanout = FanoutWriter(
        lambda p: RollingFileWriter(lambda: factory(p), 64 * KiB, factory.estimator), 64 * MiB
    )
    for i in range(20):
        fanout.write((i % 2,), batch(i * 2000, 2000))
    closed = fanout.abort()
    assert closed
    remaining = {f"file://{p}" for p in tmp_path.iterdir()}
    assert remaining == set(closed)  # open files deleted, closed ones left for the caller


def _fanout(factory: FileFactory, budget: int, close_threads: int) -> FanoutWriter:
    """Files of up to 64 MiB per value."""
    return FanoutWriter(
        lambda p: RollingFileWriter(lambda: factory(p), 64 * MiB, factory.estimator),
        budget,
        close_threads=close_threads,
    )


def _file_ids(path: str) -> list[int]:
    return pq.read_table(path.removeprefix("file://")).column("id").to_pylist()


@pytest.mark.parametrize("close_threads", [1, 2])
def test_finished_values_are_closed_in_the_background_and_lose_nothing(
    tmp_path: Path, close_threads: int
) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=MiB)
    fanout = _fanout(factory, budget=8 * MiB, close_threads=close_threads)
    for value in range(6):  # the values arrive one after the other, 3 batches each
        for i in range(3):
            start = (value * 3 + i) * 1000
            fanout.write((value,), batch(start, 1000))
        fanout.finish([(value - 1,)] if value else [])  # the previous value is complete
        assert fanout.open_writers() == 1  # finished values no longer hold a writer
    fanout.write((1,), batch(18_000, 500))  # a late row of a finished value: a new file
    fanout.close()
    messages = fanout.result()
    assert sorted(m.partition[0] for m in messages) == [0, 1, 1, 2, 3, 4, 5]
    for m in messages:
        ids = _file_ids(m.path)
        assert m.record_count == len(ids)
        assert all(i // 3000 == m.partition[0] or (i >= 18_000 and m.partition == (1,)) for i in ids)
    assert sorted(i for m in messages for i in _file_ids(m.path)) == list(range(18_500))


def test_abort_after_finish_reports_every_closed_file(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=16 * KiB)
    fanout = _fanout(factory, budget=64 * MiB, close_threads=2)
    for value in range(4):
        fanout.write((value,), batch(value * 2000, 2000))
    fanout.finish([(0,), (1,)])
    closed = fanout.abort()
    remaining = {f"file://{p}" for p in tmp_path.iterdir()}
    assert remaining == set(closed)  # finished files kept for the caller, open ones deleted
    assert len(closed) <= 2


def test_a_failed_background_close_is_raised_and_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=MiB)
    fanout = _fanout(factory, budget=64 * MiB, close_threads=2)
    for value in range(3):
        fanout.write((value,), batch(value * 1000, 1000))
    real_close = ParquetFileWriter.close

    def close(self: ParquetFileWriter) -> None:
        real_close(self)  # the file is complete on disk, then the close fails
        if self.partition == (1,):
            raise OSError("disk full")

    monkeypatch.setattr(ParquetFileWriter, "close", close)
    with pytest.raises(OSError, match="disk full"):  # from finish() or close(): the background close races
        fanout.finish([(0,), (1,)])
        fanout.close()
    later: list[Callable[[], object]] = [
        lambda: fanout.write((2,), batch(5000, 10)),
        lambda: fanout.finish([]),
        fanout.close,
        fanout.result,
    ]
    for call in later:  # broken: nothing carries on as if the failed file had been written
        with pytest.raises(OSError, match="disk full"):
            call()
    closed = fanout.abort()
    remaining = {f"file://{p}" for p in tmp_path.iterdir()}
    assert remaining == set(closed)  # the failed file was deleted, the open one too
    assert len(closed) == 1 and _file_ids(closed[0]) == list(range(1000))  # value 0's file


@pytest.mark.parametrize("close_threads", [1, 2])
def test_closed_files_are_taken_while_rows_arrive_and_each_is_reported_once(
    tmp_path: Path, close_threads: int
) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * MiB)
    fanout = _fanout(factory, budget=MiB, close_threads=close_threads)  # 2-row files, as above
    taken = []
    for i in range(1000):
        fanout.write((i % 500,), batch(2 * i, 2))
        if i == 400:
            fanout.finish([(0,), (1,)])  # closed in the background: taken once their close is done
        taken.append(fanout.take_closed(at_least=50))
        assert all(len(part) >= 50 for part in taken if part)
    assert sum(1 for part in taken if part) >= 2  # taken in several parts while rows still came
    assert fanout.take_closed(at_least=10**9) == []  # too few: left for later
    fanout.close()
    messages = [m for part in taken for m in part] + fanout.result()
    paths = [m.path for m in messages]
    assert len(paths) == len(set(paths)) == len(list(tmp_path.iterdir()))  # every file, once
    assert sorted(i for m in messages for i in _file_ids(m.path)) == list(range(2000))


def test_abort_deletes_nothing_itself_and_reports_the_files_already_taken(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * MiB)
    fanout = _fanout(factory, budget=MiB, close_threads=1)
    taken = []
    for i in range(1500):
        fanout.write((i % 500,), batch(2 * i, 2))
        taken += fanout.take_closed(at_least=20)
    assert taken
    closed = fanout.abort()
    assert {m.path for m in taken} <= set(closed)
    assert {f"file://{p}" for p in tmp_path.iterdir()} == set(closed)


def test_among_files_holding_as_much_the_budget_closes_the_oldest(tmp_path: Path) -> None:
    # One-row files, as a budget spread over thousands of values makes them: each holds a
    # slice of the chunk its row came in, which keeps that chunk alive. Closing the oldest
    # first lets the old chunks go.
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * MiB)
    probe = _fanout(factory, budget=MiB, close_threads=1)
    probe.write(("probe",), batch(0, 1), 100)  # every row counted as 100 bytes: all hold as much
    one_row = probe.buffered_bytes()
    probe.abort()
    fanout = _fanout(factory, budget=3 * one_row, close_threads=1)
    for i, value in enumerate("abc"):
        fanout.write((value,), batch(i, 1), 100)
    fanout.write(("d",), batch(3, 1), 100)  # over the budget: "a" is the oldest
    fanout.write(("a",), batch(4, 1), 100)  # "a" again, in a new file: now "b" is the oldest
    closed = fanout.take_closed()
    assert sorted(m.partition for m in closed) == [("a",), ("b",)]
    assert sorted(i for m in closed for i in _file_ids(m.path)) == [0, 1]


def test_the_budget_closes_the_largest_by_what_each_holds_now_not_at_its_last_write(tmp_path: Path) -> None:
    # "a" was the largest, then wrote a row group out and holds nothing: "b" is closed.
    factory = FileFactory(tmp_path)
    probe = _fanout(factory, budget=MiB, close_threads=1)
    probe.write(("probe",), batch(0, 1), 0)
    overhead = probe.buffered_bytes()  # what a batch held costs beyond its bytes
    probe.abort()
    factory.row_group_size_bytes = int(75_000 * factory.estimator.ratio)
    fanout = _fanout(factory, budget=60_000 + 2 * overhead - 1, close_threads=1)
    fanout.write(("a",), batch(0, 1), 50_000)
    fanout.write(("a",), batch(1, 1), 50_000)  # past the row group size: written out
    assert fanout.buffered_bytes() == 0
    fanout.write(("b",), batch(2, 1), 40_000)
    fanout.write(("c",), batch(3, 1), 20_000)  # over the budget by one byte
    closed = fanout.take_closed()
    assert [m.partition for m in closed] == [("b",)]
    assert _file_ids(closed[0].path) == [2]
    assert fanout.buffered_bytes() == 20_000 + overhead
    fanout.close()
    by_value = {m.partition: _file_ids(m.path) for m in fanout.result()}
    assert by_value == {("a",): [0, 1], ("c",): [3]}
