"""Rows in == rows read back, for every partition transform; data files match their content."""

from __future__ import annotations

import datetime as dt
import logging
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from tests.support.duckdb_reader import duckdb_read
from tests.support.tables import check_data_files, row_multiset, summary_of, table_rows

SCHEMA = st.StructType(
    [
        st.StructField("id", st.LongType(), False),
        st.StructField("i", st.IntegerType()),
        st.StructField("s", st.StringType()),
        st.StructField("d", st.DateType()),
        st.StructField("ts", st.TimestampType()),
        st.StructField("ntz", st.TimestampNTZType()),
        st.StructField("dec", st.DecimalType(12, 3)),
        st.StructField("f", st.DoubleType()),
        st.StructField("flag", st.BooleanType()),
        st.StructField("b", st.BinaryType()),
        st.StructField(
            "nested",
            st.StructType(
                [st.StructField("a", st.IntegerType()), st.StructField("tags", st.ArrayType(st.StringType()))]
            ),
        ),
        st.StructField("m", st.MapType(st.StringType(), st.LongType())),
    ]
)


def make_rows(n: int, seed: int = 0) -> list[tuple[Any, ...]]:
    rows = []
    base = dt.datetime(2023, 12, 30, 22, 0, 0)
    for k in range(n):
        x = (k * 7919 + seed) % 1000
        rows.append(
            (
                k,
                None if x % 17 == 0 else x - 500,
                None if x % 13 == 0 else f"v{x % 37}-\U0001f600" if x % 5 == 0 else f"value-{x % 41}",
                dt.date(1969, 12, 25) + dt.timedelta(days=x % 20),
                base + dt.timedelta(minutes=37 * x),
                base + dt.timedelta(minutes=53 * x),
                None if x % 11 == 0 else Decimal(x * 7 - 3000) / Decimal(1000),
                float("nan") if x % 19 == 0 else x / 3.0,
                x % 2 == 0,
                bytes([x % 256, (x * 3) % 256]),
                (x % 9, [f"t{x % 3}", f"u{x % 4}"]),
                {f"k{x % 3}": x},
            )
        )
    return rows


def frame(spark: SparkSession, n: int = 600, seed: int = 0) -> DataFrame:
    return spark.createDataFrame(make_rows(n, seed), SCHEMA)


def expected_rows(df: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def normalized(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Spark Row maps and structs -> plain values, comparable with pyiceberg's Arrow reads."""
    out = []
    for row in rows:
        plain = dict(row)
        if isinstance(plain.get("nested"), dict):
            plain["nested"] = dict(plain["nested"])
        out.append(plain)
    return out


SPECS = [
    None,
    "s",
    "identity(d)",
    "bucket(8, i)",
    "bucket(4, s)",
    "bucket(4, dec)",
    "bucket(3, id)",
    "truncate(3, s)",
    "truncate(10, i)",
    "truncate(2, dec)",
    "year(ts)",
    "month(d)",
    "day(ntz)",
    "hour(ts)",
    "day(ts), bucket(4, id)",
    "flag, truncate(2, s), month(ts)",
    "bucket(2, i), bucket(3, s)",
]


# ``none`` computes the partition values in the write tasks (pyarrow), the default
# distribution in Spark: both must put every row in the file of its partition value.
@pytest.mark.parametrize("mode", [None, "none"])
@pytest.mark.parametrize("partition_by", SPECS)
def test_rows_read_back_equal_input(
    spark: SparkSession, catalog_options: dict[str, str], partition_by: str | None, mode: str | None
) -> None:
    options = {**catalog_options, "table": "db.roundtrip", "sink-id": "roundtrip"}
    if partition_by:
        options["partition-by"] = partition_by
    if mode:
        options["distribution-mode"] = mode
    sink = IcebergSink.from_options(options)
    df = frame(spark)
    sink(df, 0)
    table = sink.catalog.load_table("db.roundtrip")
    assert row_multiset(table_rows(table)) == row_multiset(normalized(expected_rows(df)))
    assert check_data_files(table) >= 1
    summary = summary_of(table.current_snapshot())
    assert summary["icesink.sink-id"] == "roundtrip"
    assert summary["icesink.batch-ids"] == "0"
    assert int(summary["added-records"]) == 600


def test_several_batches_append(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.multi", "sink-id": "multi", "partition-by": "day(ts)"}
    sink = IcebergSink.from_options(options)
    frames = [frame(spark, 300, seed) for seed in range(3)]
    for batch_id, df in enumerate(frames):
        sink(df, batch_id)
    table = sink.catalog.load_table("db.multi")
    expected = [row for df in frames for row in normalized(expected_rows(df))]
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    assert len(table.snapshots()) == 3
    assert table.properties["icesink.sink.multi.last-batch-id"] == "2"


@pytest.mark.parametrize("partition_by", ["day(ts), bucket(4, id)", "truncate(2, dec), s"])
def test_small_batches_after_the_first_are_written_by_the_driver(
    spark: SparkSession, catalog_options: dict[str, str], partition_by: str, caplog: pytest.LogCaptureFixture
) -> None:
    options = {**catalog_options, "table": "db.small", "sink-id": "small", "partition-by": partition_by}
    sink = IcebergSink.from_options(options)
    frames = [frame(spark, 400, seed) for seed in range(3)]
    with caplog.at_level(logging.INFO, logger="icesink.route.router"):
        for batch_id, df in enumerate(frames):
            sink(df, batch_id)
    driver_batches = [_first_arg(r) for r in caplog.records if "the driver writes" in r.getMessage()]
    assert driver_batches == [1, 2]  # the first batch has no history: it is shuffled
    table = sink.catalog.load_table("db.small")
    expected = [row for df in frames for row in normalized(expected_rows(df))]
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    assert check_data_files(table) >= 3
    assert [int(summary_of(s)["added-records"]) for s in table.snapshots()] == [400, 400, 400]


def test_an_existing_format_v1_table_takes_appends_and_stays_v1(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.legacy", "sink-id": "legacy"}
    sink = IcebergSink.from_options(options)
    sink.catalog.create_namespace("db")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()))
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))
    sink.catalog.create_table("db.legacy", schema, partition_spec=spec, properties={"format-version": "1"})
    batches = [[(i, f"r{i % 3}") for i in range(b * 100, b * 100 + 100)] for b in range(2)]
    for batch_id, rows in enumerate(batches):
        sink(spark.createDataFrame(rows, "id long, region string"), batch_id)
    table = sink.catalog.load_table("db.legacy")
    expected = [{"id": i, "region": r} for rows in batches for i, r in rows]
    assert table.format_version == 1
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    assert row_multiset(duckdb_read(table.metadata_location).to_pylist()) == row_multiset(expected)
    assert check_data_files(table) == 6  # three regions, two batches
    assert [summary_of(s)["icesink.batch-ids"] for s in table.snapshots()] == ["0", "1"]


def test_empty_batch_commits_nothing(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.empty", "sink-id": "empty", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    sink(spark.createDataFrame([], SCHEMA), 0)
    table = sink.catalog.load_table("db.empty")
    assert table.current_snapshot() is None
    assert table.scan().to_arrow().num_rows == 0
    value = sink.metrics.registry.get_sample_value(
        "icesink_batches_total", {"table": "db.empty", "sink_id": "empty", "outcome": "empty"}
    )
    assert value == 1.0


def _first_arg(record: logging.LogRecord) -> object:
    assert isinstance(record.args, tuple)
    return record.args[0]
