"""What a batch's plan expects to read, before reading it: the bytes of its files, or nothing known."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from icesink.jobs.taxi_workload import taxi_rows, write_files
from icesink.spark_session import planned_input_bytes
from tests.support.parquet_streams import stream_parquet_folder


def _file_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("part-*.parquet"))


def test_a_read_of_files_plans_their_bytes(spark: SparkSession, tmp_path: Path) -> None:
    folder = write_files(spark, tmp_path / "input", 3, 2000)
    assert planned_input_bytes(spark.read.parquet(str(folder))) == _file_bytes(folder) > 0


def test_a_file_source_micro_batch_plans_its_files_bytes(spark: SparkSession, tmp_path: Path) -> None:
    """``foreachBatch`` hands over the rows of a plan already made: its statistics come along."""
    folder = write_files(spark, tmp_path / "input", 2, 2000)
    planned: list[int | None] = []

    def record(batch_df: DataFrame, batch_id: int) -> None:
        planned.append(planned_input_bytes(batch_df.select("*", (batch_df.VendorID + 1).alias("v"))))

    stream_parquet_folder(spark, folder, record, tmp_path / "checkpoint", files_per_trigger=1, timeout_s=300)
    one_file = _file_bytes(folder) / 2
    assert len(planned) == 2
    assert all(p is not None and 0.5 * one_file < p < 2 * one_file for p in planned), (planned, one_file)


def test_rows_made_by_spark_plan_nothing(spark: SparkSession) -> None:
    assert planned_input_bytes(spark.range(10)) is None
    assert planned_input_bytes(taxi_rows(spark, 0, 100)) is None
