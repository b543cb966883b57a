"""The reference workload: NYC-yellow-taxi-shaped rows, generated deterministically.

19 columns, pickup times spread over 4 days (2024-01-01 .. 2024-01-04 UTC), meant to be
partitioned by ``day(tpep_pickup_datetime), bucket(16, PULocationID)``: 64 partition
values. Values come from hashes of the row number, so the same ``(start, rows)`` always
gives the same rows, on any machine and with any number of Spark partitions.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

PARTITION_BY = "day(tpep_pickup_datetime), bucket(16, PULocationID)"
START_EPOCH_S = 1_704_067_200  # 2024-01-01T00:00:00Z
SPAN_S = 4 * 86_400
MONEY_COLUMNS = (
    "fare_amount",
    "extra",
    "mta_tax",
    "tip_amount",
    "tolls_amount",
    "improvement_surcharge",
    "total_amount",
    "congestion_surcharge",
    "airport_fee",
)


def _uniform(seed: int) -> Column:
    """A value in [0, 1) from a hash of the row id and ``seed``."""
    return F.pmod(F.xxhash64(F.col("id"), F.lit(seed)), F.lit(1_000_003)).cast("double") / F.lit(1_000_003.0)


def taxi_rows(spark: SparkSession, start: int, rows: int, partitions: int | None = None) -> DataFrame:
    """Rows ``start .. start + rows - 1`` of the workload."""
    base = spark.range(start, start + rows, numPartitions=partitions or spark.sparkContext.defaultParallelism)
    pickup_s = F.lit(START_EPOCH_S) + (_uniform(1) * SPAN_S).cast("long")
    duration_s = (F.lit(120) + _uniform(2) * 3600).cast("long")
    columns = [
        (F.lit(1) + (_uniform(3) * 2).cast("int")).alias("VendorID"),
        F.timestamp_seconds(pickup_s).alias("tpep_pickup_datetime"),
        F.timestamp_seconds(pickup_s + duration_s).alias("tpep_dropoff_datetime"),
        (F.lit(1) + (_uniform(4) * 6).cast("long")).alias("passenger_count"),
        F.round(_uniform(5) * 30, 2).alias("trip_distance"),
        (F.lit(1) + (_uniform(6) * 6).cast("long")).alias("RatecodeID"),
        F.when(_uniform(7) < 0.02, F.lit("Y")).otherwise(F.lit("N")).alias("store_and_fwd_flag"),
        (F.lit(1) + (_uniform(8) * 265).cast("int")).alias("PULocationID"),
        (F.lit(1) + (_uniform(9) * 265).cast("int")).alias("DOLocationID"),
        (F.lit(1) + (_uniform(10) * 5).cast("long")).alias("payment_type"),
    ]
    columns += [F.round(_uniform(11 + i) * 80, 2).alias(name) for i, name in enumerate(MONEY_COLUMNS)]
    return base.select(*columns)


# On-disk bytes per row of the workload's Parquet files (snappy), to size row groups.
_FILE_BYTES_PER_ROW = 36


def write_files(
    spark: SparkSession, folder: Path, files: int, rows_per_file: int, row_groups_per_file: int = 1
) -> Path:
    """Write the workload as ``files`` Parquet files of ``rows_per_file`` consecutive rows each.

    With ``row_groups_per_file`` above 1 each file is cut into about that many row groups,
    so Spark can read one file in several tasks (it splits files only at row groups).
    Kept when ``folder`` already holds a complete write of the same shape.
    """
    marker = folder / (
        f"_WORKLOAD_{files}x{rows_per_file}" + (f"x{row_groups_per_file}" if row_groups_per_file > 1 else "")
    )
    if marker.exists():
        return folder
    # range() with one Spark partition per file gives each file a contiguous id range.
    writer = taxi_rows(spark, 0, files * rows_per_file, partitions=files).write.mode("overwrite")
    if row_groups_per_file > 1:
        block = rows_per_file * _FILE_BYTES_PER_ROW // row_groups_per_file
        writer = writer.option("parquet.block.size", str(block))
    writer.parquet(str(folder))
    marker.touch()
    return folder
