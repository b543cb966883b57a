"""What a Parquet file's footer lets the write tasks read: names, types, Spark's calendar marks, ranges."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesink.batch.parquet_footers import in_range, read_footer, readable, row_bytes

UTC_MICROS = pa.timestamp("us", tz="UTC")
TARGET = pa.schema([("id", pa.int64()), ("day", pa.date32()), ("ts", UTC_MICROS), ("name", pa.string())])
SPARK_3_5 = {b"org.apache.spark.version": b"3.5.1"}


def _write(path: Path, table: pa.Table, metadata: dict[bytes, bytes] | None = None, **options: object) -> str:
    if metadata is not None:
        table = table.replace_schema_metadata(metadata)
    pq.write_table(table, path, **options)
    return str(path)


def _rows(n: int = 100, start: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "day": pa.array([start.date() + dt.timedelta(days=i) for i in range(n)], pa.date32()),
            "ts": pa.array([start + dt.timedelta(hours=i) for i in range(n)], UTC_MICROS),
            "name": pa.array([f"n{i}" for i in range(n)]),
        }
    )


def test_a_file_of_the_tables_columns_is_readable_with_its_ranges_in_its_statistics(tmp_path: Path) -> None:
    footer = read_footer(_write(tmp_path / "a.parquet", _rows(), row_group_size=30))
    assert footer is not None and footer.metadata.num_row_groups == 4
    assert readable(footer, TARGET, legacy_mode=False)
    assert in_range(footer, TARGET, ["day", "ts"])
    assert 8 + 4 + 8 <= row_bytes(footer, TARGET) < 64  # fixed widths, and the names' bytes


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.drop_columns(["name"]),
        lambda t: t.rename_columns(["ID", "day", "ts", "name"]),
        lambda t: t.append_column("NAME", pa.array(["x"] * t.num_rows)),  # Spark could match either
        lambda t: t.set_column(0, "id", t.column("id").cast(pa.int32())),
    ],
)
def test_a_file_spark_reads_otherwise_is_not_readable(tmp_path: Path, change: object) -> None:
    footer = read_footer(_write(tmp_path / "a.parquet", change(_rows())))  # type: ignore[operator]
    assert footer is not None and not readable(footer, TARGET, legacy_mode=False)


def test_sparks_calendar_marks_decide_who_reads_the_file(tmp_path: Path) -> None:
    def footer_of(name: str, metadata: dict[bytes, bytes] | None) -> object:
        return read_footer(_write(tmp_path / name, _rows(), metadata))

    modern = footer_of("modern.parquet", SPARK_3_5)
    legacy = footer_of("legacy.parquet", {**SPARK_3_5, b"org.apache.spark.legacyDateTime": b""})
    old = footer_of("old.parquet", {b"org.apache.spark.version": b"3.0.3"})
    other = footer_of("other.parquet", None)  # not Spark's: Spark reads it by its session's mode
    assert readable(modern, TARGET, legacy_mode=True)  # type: ignore[arg-type]
    assert not readable(legacy, TARGET, legacy_mode=False)  # type: ignore[arg-type]
    assert not readable(old, TARGET, legacy_mode=False)  # type: ignore[arg-type]
    assert readable(other, TARGET, legacy_mode=False)  # type: ignore[arg-type]
    assert not readable(other, TARGET, legacy_mode=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("int96", [False, True], ids=["statistics", "int96-read-here"])
def test_a_value_outside_the_written_range_is_found(tmp_path: Path, int96: bool) -> None:
    rows = _rows()
    far = pa.array([253_402_300_800_000_000], UTC_MICROS)  # 10000-01-01
    bad = rows.set_column(2, "ts", pa.concat_arrays([rows.column("ts").combine_chunks()[:-1], far]))
    for name, table, expected in (("good.parquet", rows, True), ("bad.parquet", bad, False)):
        path = _write(
            tmp_path / name, table, SPARK_3_5, row_group_size=40, use_deprecated_int96_timestamps=int96
        )
        footer = read_footer(path)
        assert footer is not None and readable(footer, TARGET, legacy_mode=False)
        stats = footer.metadata.row_group(0).column(2).statistics
        assert (stats is not None and stats.has_min_max) is not int96  # no statistics for INT96
        assert in_range(footer, TARGET, ["ts"]) is expected


def test_a_file_not_of_spark_must_keep_to_values_spark_reads_without_a_mode(tmp_path: Path) -> None:
    """Before 1900 Spark's reader fails on a file it cannot place in a calendar (EXCEPTION, its default)."""
    early = _rows(start=dt.datetime(1899, 12, 31, tzinfo=dt.UTC))
    assert not in_range(read_footer(_write(tmp_path / "other.parquet", early)), TARGET, ["ts"])  # type: ignore[arg-type]
    assert in_range(read_footer(_write(tmp_path / "spark.parquet", early, SPARK_3_5)), TARGET, ["ts"])  # type: ignore[arg-type]


def test_a_file_pyarrow_cannot_read_has_no_footer(tmp_path: Path) -> None:
    (tmp_path / "not.parquet").write_bytes(b"PAR1 not a footer")
    assert read_footer(str(tmp_path / "not.parquet")) is None
    assert read_footer(str(tmp_path / "missing.parquet")) is None
