"""How many Spark jobs a call runs: what the routed sink promises not to grow with its tables."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql import SparkSession


def count_spark_jobs(spark: SparkSession, call: Callable[[], None]) -> int:
    """Spark jobs ``call`` runs on this thread (counted through its job group)."""
    group = f"count-{uuid.uuid4().hex[:8]}"
    context = spark.sparkContext
    context.setJobGroup(group, "count the jobs of one call")
    try:
        call()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return len(context.statusTracker().getJobIdsForGroup(group))
