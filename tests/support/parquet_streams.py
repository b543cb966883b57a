"""A folder of Parquet files streamed through a ``foreachBatch`` function to its end, as a user's
``readStream.parquet`` job would run it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType


def stream_parquet_folder(
    spark: SparkSession,
    folder: Path | str,
    batch_function: Callable[[DataFrame, int], Any],
    checkpoint: Path,
    *,
    files_per_trigger: int | None = None,
    timeout_s: int = 600,
    schema: StructType | None = None,
) -> None:
    """Run ``folder``'s files through ``batch_function`` with ``trigger(availableNow=True)``,
    ``files_per_trigger`` files a micro-batch (Spark's default: all at once); raise the query's
    failure, if any. ``schema``: the stream's (by default, Spark's reading of the folder)."""
    reader = spark.readStream.schema(schema or spark.read.parquet(str(folder)).schema)
    if files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", files_per_trigger)
    query = (
        reader.parquet(str(folder))
        .writeStream.foreachBatch(batch_function)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(timeout_s)
    assert query.exception() is None, query.exception()
