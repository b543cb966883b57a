"""Position delete files: layout, order, statistics and the message the driver gets."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import from_bytes
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.types import LongType, StringType

from icesink.write.messages import CONTENT_POSITION_DELETES, DataFileMessage
from icesink.write.position_deletes import FILE_PATH_FIELD_ID, POS_FIELD_ID, PositionDeleteWriter


def _rows(paths: list[str], positions: list[int]) -> pa.RecordBatch:
    return pa.record_batch({"file_path": pa.array(paths), "pos": pa.array(positions, pa.int64())})


def test_file_is_sorted_deduplicated_with_reserved_field_ids(tmp_path: Path) -> None:
    path = f"file://{tmp_path}/d.parquet"
    writer = PositionDeleteWriter(PyArrowFileIO(), path, (3,), 0, "zstd")
    writer.write(_rows(["file:///b.parquet", "file:///a.parquet", "file:///b.parquet"], [7, 9, 2]))
    writer.write(_rows(["file:///a.parquet", "file:///b.parquet"], [1, 7]))
    writer.close()
    writer.close()  # safe twice

    content = pq.read_table(path.removeprefix("file://"))
    assert content.to_pylist() == [
        {"file_path": "file:///a.parquet", "pos": 1},
        {"file_path": "file:///a.parquet", "pos": 9},
        {"file_path": "file:///b.parquet", "pos": 2},
        {"file_path": "file:///b.parquet", "pos": 7},
    ]
    schema = pq.read_schema(path.removeprefix("file://"))
    assert [(f.name, f.nullable, f.metadata[b"PARQUET:field_id"]) for f in schema] == [
        ("file_path", False, str(FILE_PATH_FIELD_ID).encode()),
        ("pos", False, str(POS_FIELD_ID).encode()),
    ]
    message = writer.result()
    assert message is not None
    assert message.content == CONTENT_POSITION_DELETES
    assert message.record_count == 4 and message.partition == (3,)
    assert message.file_size_bytes == (tmp_path / "d.parquet").stat().st_size
    assert message.value_counts == {FILE_PATH_FIELD_ID: 4, POS_FIELD_ID: 4}
    assert from_bytes(StringType(), message.lower_bounds[FILE_PATH_FIELD_ID]) == "file:///a.parquet"
    assert from_bytes(StringType(), message.upper_bounds[FILE_PATH_FIELD_ID]) == "file:///b.parquet"
    assert from_bytes(LongType(), message.lower_bounds[POS_FIELD_ID]) == 1
    assert from_bytes(LongType(), message.upper_bounds[POS_FIELD_ID]) == 9
    assert message.referenced_files == ("file:///a.parquet", "file:///b.parquet")  # for the conflict check
    assert DataFileMessage.from_json(message.to_json()) == message


def test_long_paths_keep_full_bounds(tmp_path: Path) -> None:
    data_file = "file:///warehouse/db/table/data/id_bucket=1/" + "x" * 80 + ".parquet"
    writer = PositionDeleteWriter(PyArrowFileIO(), f"file://{tmp_path}/d.parquet", (1,), 0, "zstd")
    writer.write(_rows([data_file, data_file], [5, 3]))
    writer.close()
    message = writer.result()
    assert message is not None
    # Equal, untruncated bounds: readers index the file by the one data file it refers to.
    assert (
        message.lower_bounds[FILE_PATH_FIELD_ID]
        == message.upper_bounds[FILE_PATH_FIELD_ID]
        == data_file.encode()
    )


def test_no_rows_no_file(tmp_path: Path) -> None:
    writer = PositionDeleteWriter(PyArrowFileIO(), f"file://{tmp_path}/d.parquet", (), 0, "zstd")
    with pytest.raises(RuntimeError):
        writer.result()
    writer.close()
    assert writer.result() is None
    assert not (tmp_path / "d.parquet").exists()


def test_positions_are_written_plain_and_paths_with_their_dictionary(tmp_path: Path) -> None:
    paths = [f"file:///warehouse/db/t/data/{i % 3}.parquet" for i in range(6_000)]
    writer = PositionDeleteWriter(PyArrowFileIO(), f"file://{tmp_path}/d.parquet", (), 0, "zstd")
    writer.write(_rows(paths, list(range(6_000))))
    writer.close()

    file = tmp_path / "d.parquet"
    chunks = pq.read_metadata(file).row_group(0)
    assert [(chunks.column(i).path_in_schema, chunks.column(i).has_dictionary_page) for i in range(2)] == [
        ("file_path", True),
        ("pos", False),  # unique within each data file: a dictionary would only add its indices
    ]
    content = pq.read_table(file)
    assert content.num_rows == 6_000
    assert sorted(zip(content["file_path"].to_pylist(), content["pos"].to_pylist(), strict=True)) == sorted(
        zip(paths, range(6_000), strict=True)
    )


def _written(path: str) -> list[tuple[str, int]]:
    content = pq.read_table(path.removeprefix("file://"))
    return list(zip(content["file_path"].to_pylist(), content["pos"].to_pylist(), strict=True))


def test_rows_are_in_the_specs_string_order_from_strings_and_dictionaries(tmp_path: Path) -> None:
    """Paths sorted as strings (UTF-8 bytes: "10" before "9", "é" after "z"), positions as numbers,
    duplicates dropped across batches of either encoding; one dictionary not shared by the others."""
    paths = ["file:///d/9.parquet", "file:///d/10.parquet", "file:///d/é.parquet", "file:///d/z.parquet"]
    rows = [(paths[i % 4], (i * 7919) % 50 + (1 << 40) * (i % 2)) for i in range(400)]
    path = f"file://{tmp_path}/d.parquet"
    writer = PositionDeleteWriter(PyArrowFileIO(), path, (1,), 0, "zstd")
    writer.write(_rows([p for p, _ in rows[:200]], [n for _, n in rows[:200]]))
    encoded = pa.array([p for p, _ in rows[150:]]).dictionary_encode()  # overlaps the first batch
    writer.write(pa.record_batch({"file_path": encoded, "pos": pa.array([n for _, n in rows[150:]])}))
    writer.close()

    expected = sorted(set(rows), key=lambda r: (r[0].encode(), r[1]))
    assert _written(path) == expected
    message = writer.result()
    assert message is not None and message.record_count == len(expected)
    assert message.referenced_files == tuple(sorted(paths, key=str.encode))


def test_positions_too_large_for_one_sort_key_still_sort(tmp_path: Path) -> None:
    paths = [f"file:///d/{n}.parquet" for n in range(5)]
    positions = [(1 << 62) + 3, 5, (1 << 62) + 1, 0, 7]
    path = f"file://{tmp_path}/d.parquet"
    writer = PositionDeleteWriter(PyArrowFileIO(), path, (1,), 0, "zstd")
    writer.write(_rows([paths[n % 5] for n in range(10)], positions + positions))
    writer.close()
    assert _written(path) == sorted(zip(paths, positions, strict=True))


@pytest.mark.parametrize(
    ("positions", "message"), [([3, -1], "position -1"), ([3, None], "null file_path or pos")]
)
def test_a_position_no_delete_file_can_hold_is_refused(
    tmp_path: Path, positions: list[int | None], message: str
) -> None:
    writer = PositionDeleteWriter(PyArrowFileIO(), f"file://{tmp_path}/d.parquet", (), 0, "zstd")
    writer.write(_rows(["file:///a.parquet", "file:///a.parquet"], positions))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        writer.close()
    assert not (tmp_path / "d.parquet").exists()
