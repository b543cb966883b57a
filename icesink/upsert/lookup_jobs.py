"""Where a batch's lookups run: in the driver's process when small, else in one Spark job.

Shared by the row delta commit kinds (:mod:`icesink.batch.row_deltas`,
:mod:`icesink.batch.staged_row_deltas`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import SparkSession

from icesink.spark_session import default_parallelism
from icesink.upsert.lookup import LookupResult, LookupSpec, run_lookup_locally, run_lookups
from icesink.upsert.messages import LookupTask

__all__ = ["LOOKUP_DRIVER_MAX_ROWS", "lookup_parallelism", "run_table_lookups"]

# Most rows of data files a lookup in the driver's process reads (upsert.lookup-driver-max-files).
LOOKUP_DRIVER_MAX_ROWS = 1_000_000


def lookup_parallelism(spark: SparkSession) -> int:
    """Most Spark tasks of a lookup job: the cores of the application (its default parallelism).

    Not ``spark.sql.shuffle.partitions``: a lookup has as many tasks as partitions it
    touches, at most this many, so a small batch never pays for 200 Python tasks.
    """
    return default_parallelism(spark)


def run_table_lookups(
    spark: SparkSession, lookups: Sequence[tuple[LookupSpec, list[LookupTask]]], driver_max_files: int
) -> list[LookupResult]:
    """The lookups of one batch's tables: in this process when they read at most ``driver_max_files``
    data files of at most :data:`LOOKUP_DRIVER_MAX_ROWS` rows, else in one Spark job of
    :func:`lookup_parallelism` tasks at most."""
    files = sum(len(tasks) for _, tasks in lookups)
    rows = sum(task.record_count for _, tasks in lookups for task in tasks)
    if files <= driver_max_files and rows <= LOOKUP_DRIVER_MAX_ROWS:
        return [run_lookup_locally(tasks, spec) for spec, tasks in lookups]
    return run_lookups(spark, lookups, lookup_parallelism(spark))
