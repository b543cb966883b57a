"""A write task's rows read from Parquet files: which file types read as Spark's, and the rows of a share."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesink.batch.parquet_source import plan_shares
from icesink.write.parquet_input import RowRange, read_function, readable_as

UTC_MICROS = pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize(
    ("found", "wanted"),
    [
        (pa.int64(), pa.int64()),
        (pa.timestamp("us", tz="America/New_York"), UTC_MICROS),  # the same instants
        (pa.large_string(), pa.string()),
        (pa.dictionary(pa.int32(), pa.string()), pa.string()),
        (pa.list_(pa.field("element", pa.large_string())), pa.list_(pa.field("item", pa.string()))),
        (
            pa.struct([("a", pa.int64()), ("b", pa.large_string())]),
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        (pa.map_(pa.large_string(), pa.int32()), pa.map_(pa.string(), pa.int32())),
    ],
)
def test_types_spelled_otherwise_hold_the_same_values(found: pa.DataType, wanted: pa.DataType) -> None:
    assert readable_as(found, wanted)


@pytest.mark.parametrize(
    ("found", "wanted"),
    [
        (pa.int32(), pa.int64()),  # Spark widens; read through it
        (pa.timestamp("ms", tz="UTC"), UTC_MICROS),
        (pa.timestamp("ns", tz="UTC"), UTC_MICROS),
        (pa.timestamp("us"), UTC_MICROS),  # local times are not instants
        (UTC_MICROS, pa.timestamp("us")),
        (pa.binary(), pa.string()),
        (pa.string(), pa.binary()),
        (
            pa.struct([("b", pa.string()), ("a", pa.int64())]),
            pa.struct([("a", pa.int64()), ("b", pa.string())]),
        ),
        (pa.struct([("a", pa.int64())]), pa.struct([("a", pa.int64()), ("b", pa.string())])),
        (pa.decimal128(12, 2), pa.decimal128(10, 2)),
        (pa.float32(), pa.float64()),
    ],
)
def test_types_spark_reads_otherwise_are_not_read_here(found: pa.DataType, wanted: pa.DataType) -> None:
    assert not readable_as(found, wanted)


def test_shares_balance_row_groups_by_bytes_and_keep_each_file_in_order() -> None:
    groups = [(0, 0, 100, 800), (0, 1, 100, 100), (1, 0, 100, 500), (1, 1, 100, 400), (1, 2, 100, 100)]
    shares = plan_shares(groups, 2)
    loads = [
        sum(b for f, g, _, b in groups if any((r.file, r.group) == (f, g) for r in share)) for share in shares
    ]
    assert sorted(loads) == [900, 1000]
    for share in shares:
        assert share == sorted(share, key=lambda r: (r.file, r.group, r.start))
    assert sorted((r.file, r.group) for share in shares for r in share) == [(f, g) for f, g, _, _ in groups]


def test_a_row_group_is_cut_into_ranges_when_there_are_fewer_than_tasks() -> None:
    shares = plan_shares([(0, 0, 1001, 4000)], 2)
    assert shares == [[RowRange(0, 0, 0, 500)], [RowRange(0, 0, 500, 1001)]] or shares == [
        [RowRange(0, 0, 500, 1001)],
        [RowRange(0, 0, 0, 500)],
    ]
    assert plan_shares([(0, 0, 1, 10)], 4) == [[RowRange(0, 0, 0, 1)]]  # one row: one share
    assert plan_shares([(0, 0, 3, 30), (0, 1, 3, 30)], 1) == [[RowRange(0, 0, 0, 3), RowRange(0, 1, 0, 3)]]


def test_each_share_reads_its_rows_once_as_the_wanted_schema(tmp_path: Path) -> None:
    rows = 10_000
    table = pa.table(
        {
            "other": pa.array(range(rows), pa.int64()),
            "ts": pa.array(range(rows), pa.timestamp("us", tz="Europe/Paris")),
            "id": pa.array(range(rows), pa.int64()),
            "name": pa.array([f"n{i}" for i in range(rows)], pa.large_string()),
        }
    )
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=3_000)  # 4 row groups: 3,000 x 3 and 1,000
    groups = [(0, g, n, 1) for g, n in enumerate([3_000, 3_000, 3_000, 1_000])]
    wanted = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", UTC_MICROS)])
    for tasks in (1, 2, 3, 7):
        shares = plan_shares(groups[:1] if tasks == 7 else groups, tasks)
        read = read_function([str(path)], shares, wanted)
        batches = list(read(iter([pa.record_batch({"id": pa.array(range(len(shares)), pa.int64())})])))
        assert all(b.schema == wanted for b in batches)
        got = pa.Table.from_batches(batches, schema=wanted)
        expected = 3_000 if tasks == 7 else rows
        assert sorted(got.column("id").to_pylist()) == list(range(expected))
        assert got.column("name").to_pylist() == [f"n{i}" for i in got.column("id").to_pylist()]
        assert got.column("ts").cast(pa.int64()).to_pylist() == got.column("id").to_pylist()
