"""The stream every contender of :mod:`benchmarks.run` writes, and its partitioning.

The reference workload's Parquet files (:mod:`icesink.jobs.taxi_workload`) read one file per
micro-batch, partitioned by ``day(pickup)`` times a number of buckets (:class:`Layout`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

_DAYS = 4  # the workload's pickup times span 4 days
_ROUTE_KEY = "route_key"


@dataclass(frozen=True)
class Layout:
    """Partitioning of the stream: ``day(pickup)`` times ``partition_values / 4`` buckets.

    64 values is the reference workload (``bucket(16, PULocationID)``). PULocationID has
    only 265 values, so larger layouts bucket a derived column ``route_key =
    DOLocationID * 1000 + PULocationID`` (70,225 values), added to the stream.
    """

    partition_values: int = 64

    def __post_init__(self) -> None:
        if self.partition_values % _DAYS or self.partition_values < _DAYS:
            raise ValueError(f"partition values must be a multiple of {_DAYS}, not {self.partition_values}")

    @property
    def buckets(self) -> int:
        return self.partition_values // _DAYS

    @property
    def bucket_column(self) -> str:
        return "PULocationID" if self.partition_values == 64 else _ROUTE_KEY

    @property
    def partition_by(self) -> str:
        return f"day(tpep_pickup_datetime), bucket({self.buckets}, {self.bucket_column})"

    def prepare(self, df: DataFrame) -> DataFrame:
        if self.bucket_column != _ROUTE_KEY:
            return df
        return df.withColumn(_ROUTE_KEY, F.col("DOLocationID") * 1000 + F.col("PULocationID"))


@dataclass(frozen=True)
class Stream:
    """The input of every run: Parquet files read one per micro-batch."""

    spark: SparkSession
    source: Path
    schema: st.StructType
    layout: Layout
    rows: int
    batches: int

    def read(self) -> DataFrame:
        df = (
            self.spark.readStream.schema(self.schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(self.source))
        )
        return self.layout.prepare(df)
