"""A lookup task: key columns by field id, row groups skipped by statistics, earlier deletes honoured."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

from icesink.upsert.lookup import LookupSpec, find_rows, lookup_and_write
from icesink.upsert.messages import LookupReport, LookupTask
from icesink.write.position_deletes import PositionDeleteWriter


def _data_file(tmp_path: Path) -> str:
    """600 rows in 3 row groups of 200; key (region, id), the file's columns named differently."""
    fields = [
        pa.field("region_renamed", pa.string(), metadata={"PARQUET:field_id": "7"}),
        pa.field("ident", pa.int64(), metadata={"PARQUET:field_id": "1"}),
        pa.field("payload", pa.string(), metadata={"PARQUET:field_id": "2"}),
    ]
    ids = list(range(600))
    table = pa.table(
        [
            pa.array(["eu" if i % 2 else "us" for i in ids]),
            pa.array(ids, pa.int64()),
            pa.array([f"p{i}" for i in ids]),
        ],
        schema=pa.schema(fields),
    )
    path = tmp_path / "data.parquet"
    pq.write_table(table, path, row_group_size=200)
    return f"file://{path}"


def _task(data_file: str, keys: list[tuple[int, str]], deletes: tuple[str, ...] = ()) -> LookupTask:
    key_table = pa.table({"id": pa.array([k[0] for k in keys], pa.int64()), "region": [k[1] for k in keys]})
    return LookupTask(0, data_file, 0, (1,), 600, (1, 7), key_table, deletes)


def test_matches_by_composite_key_and_skips_row_groups(tmp_path: Path) -> None:
    data_file = _data_file(tmp_path)
    task = _task(data_file, [(5, "eu"), (6, "eu"), (450, "us"), (451, "eu"), (9999, "us")])
    rows, report = find_rows(task, PyArrowFileIO())

    assert rows.to_pylist() == [
        {"file_path": data_file, "pos": 5, "id": 5, "region": "eu"},  # (6, "eu") is not a row: 6 is "us"
        {"file_path": data_file, "pos": 450, "id": 450, "region": "us"},
        {"file_path": data_file, "pos": 451, "id": 451, "region": "eu"},
    ]
    assert report == LookupReport(files_read=1, rows_read=400, rows_matched=3, row_groups_skipped=1)


def test_rows_deleted_before_are_not_found_again(tmp_path: Path) -> None:
    data_file = _data_file(tmp_path)
    io = PyArrowFileIO()
    earlier = PositionDeleteWriter(io, f"file://{tmp_path}/earlier.parquet", (1,), 0, "zstd")
    earlier.write(
        pa.record_batch({"file_path": [data_file, "file:///other.parquet"], "pos": pa.array([5, 450])})
    )
    earlier.close()
    task = _task(data_file, [(5, "eu"), (450, "us")], deletes=(earlier.path,))

    [message], report = lookup_and_write([task], LookupSpec("t", {}, "batch-7"), io)

    assert report.rows_matched == 1
    assert message.record_count == 1 and message.referenced_files == (data_file,)
    assert message.path == f"file://{tmp_path}/batch-7-deletes-00000.parquet"
    assert pq.read_table(message.path.removeprefix("file://")).to_pylist() == [
        {"file_path": data_file, "pos": 450}
    ]


class _CountingIO(PyArrowFileIO):
    """The local file system, counting the files opened for reading."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: Counter[str] = Counter()

    def new_input(self, location: str) -> PyArrowFile:
        self.opened[location] += 1
        return super().new_input(location)


def test_each_delete_file_is_read_once_for_the_data_files_of_its_partition(tmp_path: Path) -> None:
    first = _data_file(tmp_path)
    data_files = [first]
    for n in range(1, 4):  # four data files of one partition, the same rows
        shutil.copy(first.removeprefix("file://"), tmp_path / f"data-{n}.parquet")
        data_files.append(f"file://{tmp_path}/data-{n}.parquet")
    io = _CountingIO()
    delete_files = []
    for n, positions in enumerate([[5, 7], [450]]):  # two earlier batches' partition-scoped delete files
        writer = PositionDeleteWriter(io, f"file://{tmp_path}/earlier-{n}.parquet", (1,), 0, "zstd")
        writer.write(
            pa.record_batch(
                {
                    "file_path": [path for path in data_files[n::2] for _ in positions],
                    "pos": pa.array([p for _ in data_files[n::2] for p in positions], pa.int64()),
                }
            )
        )
        writer.close()
        delete_files.append(writer.path)
    keys = [(5, "eu"), (7, "eu"), (450, "us")]
    tasks = [
        LookupTask(n, path, 0, (1,), 600, (1, 7), _task(path, keys).keys, tuple(delete_files))
        for n, path in enumerate(data_files)
    ]
    io.opened.clear()  # the writers asked for their files' sizes

    [message], report = lookup_and_write(tasks, LookupSpec("t", {}, "b"), io)

    assert {path: io.opened[path] for path in delete_files} == {path: 1 for path in delete_files}
    live = pq.read_table(message.path.removeprefix("file://")).to_pylist()
    expected = [  # files 0 and 2 lost 5 and 7 before, files 1 and 3 lost 450
        (data_files[0], 450),
        (data_files[1], 5),
        (data_files[1], 7),
        (data_files[2], 450),
        (data_files[3], 5),
        (data_files[3], 7),
    ]
    assert live == [{"file_path": path, "pos": pos} for path, pos in sorted(expected)]
    assert report.rows_matched == 6 and report.files_read == 4


def test_no_match_writes_no_file(tmp_path: Path) -> None:
    data_file = _data_file(tmp_path)
    messages, report = lookup_and_write(
        [_task(data_file, [(7, "us")])], LookupSpec("t", {}, "b"), PyArrowFileIO()
    )
    assert messages == [] and report.rows_matched == 0 and report.files_read == 1


def test_task_travels_as_json(tmp_path: Path) -> None:
    task = _task("file:///d.parquet", [(1, "eu"), (2, "us")], deletes=("file:///x.parquet",))
    assert LookupTask.from_json(task.to_json()) == task
