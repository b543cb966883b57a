from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.conversions import from_bytes
from pyiceberg.types import DoubleType, LongType

from icesink.write.parquet import COMPACT_PIECES
from tests.unit.writer_fixtures import FileFactory, batch


def test_file_has_field_ids_and_exact_statistics(tmp_path: Path) -> None:
    writer = FileFactory(tmp_path)()
    rows = [batch(0, 1000), batch(1000, 500)]
    for b in rows:
        writer.write(b)
    writer.close()
    writer.close()  # safe twice
    message = writer.result()
    assert message is not None
    path = message.path.removeprefix("file://")
    table = pq.read_table(path)
    assert table.num_rows == message.record_count == 1500
    assert message.file_size_bytes == Path(path).stat().st_size
    field_ids = [f.metadata[b"PARQUET:field_id"] for f in pq.read_schema(path)]
    assert field_ids == [b"1", b"2", b"3"]
    ids = table.column("id").to_pylist()
    assert from_bytes(LongType(), message.lower_bounds[1]) == min(ids)
    assert from_bytes(LongType(), message.upper_bounds[1]) == max(ids)
    xs = [v for v in table.column("x").to_pylist()]
    finite = [v for v in xs if not math.isnan(v)]
    assert message.nan_value_counts[2] == len(xs) - len(finite) > 0
    assert from_bytes(DoubleType(), message.lower_bounds[2]) == min(finite)
    assert message.null_value_counts[3] == table.column("s").null_count > 0
    assert message.value_counts == {1: 1500, 2: 1500, 3: 1500}


def test_merged_and_pending_pieces_make_one_row_group_in_order(tmp_path: Path) -> None:
    writer = FileFactory(tmp_path)()
    pieces = [batch(i * 100, 100) for i in range(COMPACT_PIECES + 3)]  # 8 merged, 3 written as they are
    for piece in pieces:
        writer.write(piece)
    writer.close()
    message = writer.result()
    assert message is not None
    path = message.path.removeprefix("file://")
    assert pq.read_metadata(path).num_row_groups == 1
    assert pq.read_table(path).column("id").to_pylist() == list(range(len(pieces) * 100))
    assert message.record_count == message.value_counts[1] == len(pieces) * 100


def test_length_tracks_disk_after_flush(tmp_path: Path) -> None:
    factory = FileFactory(tmp_path, row_group_size_bytes=64 * 1024)
    writer = factory()
    for i in range(20):
        writer.write(batch(i * 2000, 2000))
    estimate = writer.length_bytes()
    writer.close()
    message = writer.result()
    assert message is not None
    assert 0.8 * message.file_size_bytes <= estimate <= 1.2 * message.file_size_bytes
    assert len(message.split_offsets) > 1  # several row groups


def test_no_rows_no_file(tmp_path: Path) -> None:
    writer = FileFactory(tmp_path)()
    writer.close()
    assert writer.result() is None
    assert list(tmp_path.iterdir()) == []


def test_result_before_close_is_an_error(tmp_path: Path) -> None:
    writer = FileFactory(tmp_path)()
    with pytest.raises(RuntimeError):
        writer.result()


def test_abort_deletes_the_file(tmp_path: Path) -> None:
    writer = FileFactory(tmp_path, row_group_size_bytes=16 * 1024)()
    for i in range(5):
        writer.write(batch(i * 2000, 2000))
    assert list(tmp_path.iterdir())
    writer.abort()
    assert list(tmp_path.iterdir()) == []
