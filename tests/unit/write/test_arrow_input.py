from __future__ import annotations

import pyarrow as pa
import pytest

from icesink.write.arrow_input import InputWidth, parse_bytes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("67108864b", 64 * 1024 * 1024),  # how Spark shows its default
        ("64m", 64 * 1024 * 1024),
        ("64MB", 64 * 1024 * 1024),
        (" 2g ", 2 * 1024**3),
        ("1024", 1024),
        ("2147483647", 2**31 - 1),
        ("64 mb", None),
        ("1.5g", None),
        ("-1b", None),
        ("", None),
        ("lots", None),
    ],
)
def test_spark_size_settings_are_read_as_spark_reads_them(text: str, expected: int | None) -> None:
    assert parse_bytes(text) == expected


def test_input_width_is_the_widest_batch_in_bytes_per_row_and_passes_batches_on() -> None:
    narrow = pa.record_batch({"id": pa.array(range(1000), pa.int64())})  # 8 bytes a row
    wide = pa.record_batch({"id": pa.array(range(10), pa.int64()), "text": pa.array(["x" * 500] * 10)})
    empty = narrow.slice(0, 0)
    width = InputWidth()
    assert width.row_bytes == 0
    seen = list(width.reading(iter([narrow, empty, wide, narrow])))
    assert seen == [narrow, empty, wide, narrow]
    assert wide.get_total_buffer_size() / 10 <= width.row_bytes < wide.get_total_buffer_size() / 10 + 1
    assert 8 + 500 < width.row_bytes < 8 + 500 + 64  # values, offsets and padding
