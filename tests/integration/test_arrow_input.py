"""Spark's byte check on every row sent to a write task: off for a write after narrow rows.

Every write here stamps each row's ``name``, inside its task, with the byte cap the task
ran with (``unset``: Spark's default, checked on every row), and the data files are read back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from icesink import IcebergSink
from icesink.jobs.taxi_workload import PARTITION_BY, taxi_rows
from icesink.write.arrow_input import MAX_BYTES_PER_BATCH, MAX_RECORDS_PER_BATCH, UNCHECKED
from icesink.write.messages import WriteResult
from icesink.write.task import ArrowFunction, run_write
from tests.support.upserts import create_table, sql_catalog, write_spec

ROWS = 3000


def stamper() -> ArrowFunction:
    """A ``before`` function: every row's ``name`` becomes the byte cap its task ran with."""

    def stamp(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        cap = (context.getLocalProperty(MAX_BYTES_PER_BATCH) if context else None) or "unset"
        for batch in batches:
            yield batch.set_column(1, "name", pa.array([cap] * batch.num_rows, pa.string()))

    return stamp


def caps(result: WriteResult) -> set[str]:
    """The caps the rows of ``result``'s data files were stamped with."""
    assert sum(f.record_count for f in result.files) == ROWS
    paths = [f.path.removeprefix("file://") for f in result.files]
    return {name for path in paths for name in pq.read_table(path, columns=["name"]).column(0).to_pylist()}


def items(spark: SparkSession) -> DataFrame:
    rows = [(i, f"n{i}", i) for i in range(ROWS)]
    return spark.createDataFrame(rows, "id long, name string, v long").repartition(2)


def test_a_write_after_narrow_rows_runs_without_the_byte_check(spark: SparkSession, tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    first = run_write(items(spark), write_spec(table, "b0"), before=stamper())
    assert caps(first) == {"unset"}  # how wide the rows come is not known yet
    assert 16 <= first.input_row_bytes <= 64  # two longs and a short string, with offsets
    second = run_write(
        items(spark), write_spec(table, "b1"), before=stamper(), row_bytes=first.input_row_bytes
    )
    assert caps(second) == {str(UNCHECKED)}
    assert spark.sparkContext.getLocalProperty(MAX_BYTES_PER_BATCH) is None  # put back after the job


@pytest.mark.parametrize(
    ("row_bytes", "session", "expected"),
    [
        (2000, {}, "unset"),  # 10,000 rows of 2,000 bytes, four times over, pass 64 MiB
        (40, {MAX_RECORDS_PER_BATCH: "0"}, "unset"),  # no row cap: the byte cap is the only bound
        (40, {MAX_BYTES_PER_BATCH: "32m"}, "32m"),  # the session's own setting wins
    ],
    ids=["wide-rows", "no-row-cap", "session-cap"],
)
def test_the_byte_check_stays_where_it_bounds_the_batches_or_the_session_set_it(
    spark: SparkSession, tmp_path: Path, row_bytes: int, session: dict[str, str], expected: str
) -> None:
    table = create_table(sql_catalog(tmp_path))
    for key, value in session.items():
        spark.conf.set(key, value)
    try:
        result = run_write(items(spark), write_spec(table, "b0"), before=stamper(), row_bytes=row_bytes)
    finally:
        for key in session:
            spark.conf.unset(key)
    assert caps(result) == {expected}


def test_the_sink_turns_the_check_off_from_its_second_batch(
    spark: SparkSession, catalog_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    # Above the target, so that the batch after the first is not written by the driver.
    target = {"write.target-file-size-bytes": str(64 * 1024), "partition-by": PARTITION_BY}
    sink = IcebergSink.from_options({**catalog_options, "table": "db.widths", "sink-id": "widths", **target})
    with caplog.at_level(logging.INFO, logger="icesink.write.arrow_input"):
        sink(taxi_rows(spark, 0, 12_000, partitions=2), 0)
        assert "without Spark's byte check" not in caplog.text  # nothing known of the rows yet
        sink(taxi_rows(spark, 12_000, 12_000, partitions=2), 1)
    (record,) = [r for r in caplog.records if "without Spark's byte check" in r.getMessage()]
    row_bytes = int(record.getMessage().rsplit(": ", 1)[1].split()[0])
    assert 100 <= row_bytes <= 400, record.getMessage()  # the taxi rows' 19 columns
    assert sink.catalog.load_table("db.widths").scan().to_arrow().num_rows == 24_000


def test_a_routed_sink_turns_the_check_off_from_its_second_batch(
    spark: SparkSession, catalog_options: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    routing = {"sink-id": "routed-widths", "route.by": "field", "route.field": "kind"}
    options = {**catalog_options, **routing, "route.table-template": "ev.{value}"}

    def events(start: int) -> DataFrame:
        rows = [(start + i, ("a", "b")[i % 2], f"n{i}") for i in range(ROWS)]
        return spark.createDataFrame(rows, "id long, kind string, name string").repartition(2)

    with (
        IcebergSink.from_options(options) as sink,
        caplog.at_level(logging.INFO, logger="icesink.write.arrow_input"),
    ):
        sink(events(0), 0)
        assert "without Spark's byte check" not in caplog.text  # nothing known of the rows yet
        sink(events(ROWS), 1)
        assert "without Spark's byte check" in caplog.text
    for kind in "ab":
        assert sink.catalog.load_table(f"ev.{kind}").scan().to_arrow().num_rows == ROWS
