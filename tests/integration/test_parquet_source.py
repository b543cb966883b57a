"""Micro-batches of Parquet files read by the write tasks themselves, against Spark's read of them.

Each stream runs twice: through the sink as ``foreachBatch`` hands it the batch (the tasks read
the files when they may), and through a second sink given ``batch_df.select("*")`` (a projection:
always Spark's read). Both tables must hold the same rows, in as many files a batch; the log says
which way each batch went. A batch after a small one is written by the driver
(:mod:`icesink.route.one_task`), so a small stream's first batch is the one its tasks read.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from icesink import IcebergSink
from icesink.jobs.taxi_workload import PARTITION_BY, write_files
from tests.support.parquet_streams import stream_parquet_folder
from tests.support.tables import data_files, table_rows

READ_BY_TASKS = "the write tasks read the batch's"
_BATCH = re.compile(r"-b(\d+)-[0-9a-f]+-\d{5}-\d+-\d{5}\.parquet$")  # a data file's batch id
SOURCE_LOGGER = "icesink.batch.parquet_source"


def _stream_twice(
    spark: SparkSession,
    tmp_path: Path,
    catalog_options: dict[str, str],
    folder: Path,
    name: str,
    schema_of: str | None = None,
    **options: str,
) -> tuple[IcebergSink, IcebergSink, list[str]]:
    """``folder`` streamed a file a batch into ``db.{name}`` (as handed over) and ``db.{name}_spark``."""
    sinks = [
        IcebergSink.from_options(
            {
                **catalog_options,
                "table": f"db.{table}",
                "sink-id": table,
                "distribution-mode": "none",
                **options,
            }
        )
        for table in (name, f"{name}_spark")
    ]
    ways: list[str] = []

    def both(batch_df: DataFrame, batch_id: int) -> None:
        sinks[0](batch_df, batch_id)
        sinks[1](batch_df.select("*"), batch_id)

    logger = logging.getLogger(SOURCE_LOGGER)
    handler = _Collect(ways)
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    schema = spark.read.parquet(str(folder / schema_of)).schema if schema_of else None
    try:
        stream_parquet_folder(
            spark, folder, both, tmp_path / f"ck-{name}", files_per_trigger=1, timeout_s=600, schema=schema
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return sinks[0], sinks[1], ways


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


def _rows(sink: IcebergSink, name: str) -> list[tuple[Any, ...]]:
    rows = table_rows(sink.catalog.load_table(name))
    return sorted((tuple(_comparable(v) for v in r.values()) for r in rows), key=repr)


def _comparable(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list):
        return tuple(_comparable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _comparable(v)) for k, v in value.items()))
    return value


def _files_per_batch(sink: IcebergSink, name: str) -> Counter[int]:
    table = sink.catalog.load_table(name)
    return Counter(int(_BATCH.search(f.file_path).group(1)) for f in data_files(table))  # type: ignore[union-attr]


def test_spark_written_files_are_read_by_the_write_tasks(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    """Files as Spark writes them (INT96 timestamps, no statistics for them), several row groups a file."""
    folder = write_files(spark, tmp_path / "taxi", 2, 150_000, row_groups_per_file=4)
    sink, spark_read, ways = _stream_twice(
        spark, tmp_path, catalog_options, folder, "taxi", **{"partition-by": PARTITION_BY}
    )
    assert sum(READ_BY_TASKS in w for w in ways) == 2, ways  # large enough for the tasks, both
    assert _rows(sink, "db.taxi") == _rows(spark_read, "db.taxi_spark")
    assert len(_rows(sink, "db.taxi")) == 300_000
    assert _files_per_batch(sink, "db.taxi") == _files_per_batch(spark_read, "db.taxi_spark")
    labels = {"table": "db.taxi", "sink_id": "taxi"}
    assert sink.metrics.registry.get_sample_value("icesink_rows_written_total", labels) == 300_000


def _typed_table(rows: int, offset: int = 0) -> pa.Table:
    ids = list(range(offset, offset + rows))
    day0 = dt.date(2024, 2, 28)
    instant0 = dt.datetime(2024, 3, 31, 0, 59, 59, 999_999, tzinfo=dt.UTC)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "i": pa.array([None if k % 7 == 0 else k - 500 for k in ids], pa.int32()),
            "x": pa.array([float("nan") if k % 11 == 0 else k / 3 for k in ids], pa.float64()),
            "dec": pa.array([Decimal(k % 1000) / 100 for k in ids], pa.decimal128(10, 2)),
            "flag": pa.array([k % 2 == 0 for k in ids]),
            "day": pa.array([day0 + dt.timedelta(days=k % 400) for k in ids], pa.date32()),
            "ts": pa.array(
                [instant0 + dt.timedelta(seconds=k * 37) for k in ids], pa.timestamp("us", tz="UTC")
            ),
            "name": pa.array([None if k % 5 == 0 else f"näme {k}" for k in ids], pa.string()),
            "tags": pa.array([[f"t{k % 3}", None] if k % 4 else None for k in ids], pa.list_(pa.string())),
            "point": pa.array(
                [{"a": k, "b": str(k)} for k in ids], pa.struct([("a", pa.int64()), ("b", pa.string())])
            ),
        }
    )


@pytest.mark.parametrize("int96", [False, True], ids=["micros", "int96"])
def test_every_type_reads_as_spark_reads_it(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str], int96: bool
) -> None:
    folder = tmp_path / "typed"
    folder.mkdir()
    for n in range(2):
        pq.write_table(
            _typed_table(3_000, offset=n * 3_000),
            folder / f"part-{n}.parquet",
            row_group_size=1_000,
            use_deprecated_int96_timestamps=int96,
        )
    name = f"typed_{'int96' if int96 else 'micros'}"
    sink, spark_read, ways = _stream_twice(
        spark, tmp_path, catalog_options, folder, name, **{"partition-by": "day(ts), bucket(4, id)"}
    )
    assert ways and ways[0].startswith(READ_BY_TASKS), ways
    assert _rows(sink, f"db.{name}") == _rows(spark_read, f"db.{name}_spark")
    assert len(_rows(sink, f"db.{name}")) == 6_000
    assert _files_per_batch(sink, f"db.{name}") == _files_per_batch(spark_read, f"db.{name}_spark")


@pytest.mark.parametrize("int96", [False, True], ids=["micros", "int96"])
def test_a_timestamp_the_sink_cannot_write_is_dead_lettered_through_spark(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str], int96: bool
) -> None:
    """The footer's statistics (or, for INT96, the values read in the driver) show a year past 9999:
    Spark reads that batch and dead-letters the row."""
    folder = tmp_path / "late"
    folder.mkdir()
    first = _typed_table(1_000)
    far = pa.array([253_402_300_800_000_000], pa.timestamp("us", tz="UTC"))  # 10000-01-01
    ts = pa.concat_arrays([first.column("ts").combine_chunks().slice(0, 999), far])
    first = first.set_column(first.schema.get_field_index("ts"), "ts", ts)
    pq.write_table(first, folder / "part-0.parquet", use_deprecated_int96_timestamps=int96)
    pq.write_table(
        _typed_table(500, offset=1_000), folder / "part-1.parquet", use_deprecated_int96_timestamps=int96
    )
    for n in (0, 1):  # Spark's file source takes the oldest first
        os.utime(folder / f"part-{n}.parquet", (1_700_000_000 + n, 1_700_000_000 + n))
    name = f"late_{'int96' if int96 else 'micros'}"
    sink, spark_read, ways = _stream_twice(spark, tmp_path, catalog_options, folder, name, "part-1.parquet")
    assert ways and not ways[0].startswith(READ_BY_TASKS), ways
    assert _rows(sink, f"db.{name}") == _rows(spark_read, f"db.{name}_spark")
    assert len(_rows(sink, f"db.{name}")) == 1_499
    dead = table_rows(sink.catalog.load_table(f"db.{name}__dlq"))
    assert [(d["column"], d["reason"], d["batch_id"]) for d in dead] == [("ts", "out_of_range", 0)]


def test_a_file_spark_reads_otherwise_goes_through_spark(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str]
) -> None:
    """A file without a column of the batch (Spark reads nulls), one whose name differs but in case,
    and a timestamp column of other units: read by Spark, the rows as Spark reads them."""
    folder = tmp_path / "odd"
    folder.mkdir()
    whole = _typed_table(600)
    pq.write_table(whole, folder / "part-0.parquet")
    pq.write_table(whole.drop_columns(["name"]), folder / "part-1.parquet")
    renamed = _typed_table(300, offset=600).rename_columns(["ID", *whole.column_names[1:]])
    pq.write_table(renamed, folder / "part-2.parquet")
    millis = _typed_table(300, offset=900)
    millis = millis.set_column(6, "ts", millis.column("ts").cast(pa.timestamp("ms", tz="UTC"), safe=False))
    pq.write_table(millis, folder / "part-3.parquet", coerce_timestamps="ms")
    for n in range(4):
        os.utime(folder / f"part-{n}.parquet", (1_700_000_000 + n, 1_700_000_000 + n))
    sink, spark_read, ways = _stream_twice(spark, tmp_path, catalog_options, folder, "odd", "part-0.parquet")
    assert ways and ways[0].startswith(READ_BY_TASKS), ways
    rows = _rows(sink, "db.odd")
    assert rows == _rows(spark_read, "db.odd_spark")
    assert len(rows) == 1_800
