from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from icesink.write.messages import DataFileMessage
from icesink.write.rolling import RollingFileWriter
from tests.unit.writer_fixtures import FileFactory, batch

KiB = 1024


def test_rolls_near_target(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * KiB)
    target = 256 * KiB
    writer = RollingFileWriter(factory, target, factory.estimator)
    for i in range(40):
        writer.write(batch(i * 5000, 5000))
    writer.close()
    messages = writer.result()
    assert len(messages) >= 5
    sizes = [m.file_size_bytes for m in messages]
    assert all(s <= 1.25 * target for s in sizes), sizes
    assert all(s >= 0.85 * target for s in sizes[:-1]), sizes
    total = sum(pq.read_metadata(m.path.removeprefix("file://")).num_rows for m in messages)
    assert total == sum(m.record_count for m in messages) == 200_000


def test_one_large_batch_is_split_across_files(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=32 * KiB)
    writer = RollingFileWriter(factory, 128 * KiB, factory.estimator)
    writer.write(batch(0, 20_000))  # a few warm-up rows teach the estimator first
    writer.write(batch(20_000, 100_000))
    writer.close()
    messages = writer.result()
    assert len(messages) > 3
    assert sum(m.record_count for m in messages) == 120_000
    ids = sorted(
        i for m in messages for i in pq.read_table(m.path.removeprefix("file://")).column("id").to_pylist()
    )
    assert ids == list(range(120_000))


def test_each_message_is_finished_as_its_file_closes_and_taken_once(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * KiB)
    finished: list[str] = []

    def finish(message: DataFileMessage) -> DataFileMessage:
        finished.append(message.path)
        return replace(message, lower_bounds={}, upper_bounds={})  # what a held message keeps

    writer = RollingFileWriter(factory, 256 * KiB, factory.estimator, finish)
    for i in range(20):
        writer.write(batch(i * 5000, 5000))
    assert writer.closed_files() >= 2 and len(finished) == writer.closed_files()  # as they closed
    taken = writer.take_closed()
    assert writer.closed_files() == 0 and writer.take_closed() == []
    writer.close()
    rest = writer.result()
    messages = taken + rest
    assert [m.path for m in messages] == finished  # every file finished once, in order
    assert all(not m.lower_bounds and not m.upper_bounds for m in messages)
    assert sum(m.record_count for m in messages) == 100_000


def test_a_file_whose_finish_fails_is_still_reported_for_cleanup(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * KiB)

    def finish(message: DataFileMessage) -> DataFileMessage:
        raise ValueError("the entry could not be encoded")

    writer = RollingFileWriter(factory, 256 * KiB, factory.estimator, finish)
    with pytest.raises(ValueError, match="could not be encoded"):
        for i in range(20):
            writer.write(batch(i * 5000, 5000))
    left = writer.result_so_far()
    assert [m.path for m in left] == [f"file://{p}" for p in tmp_path.iterdir()]  # the caller deletes it
