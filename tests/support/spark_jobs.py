"""How many Spark jobs a call runs, and their stages' tasks: what the sink promises not to grow with
its tables or with ``spark.sql.shuffle.partitions``."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from pyspark.sql import SparkSession


def count_spark_jobs(spark: SparkSession, call: Callable[[], None]) -> int:
    """Spark jobs ``call`` runs on this thread (counted through its job group)."""
    return len(spark_jobs(spark, call))


def spark_jobs(spark: SparkSession, call: Callable[[], None]) -> list[int]:
    """The ids of the Spark jobs ``call`` runs on this thread (found through its job group)."""
    group = f"count-{uuid.uuid4().hex[:8]}"
    context = spark.sparkContext
    context.setJobGroup(group, "count the jobs of one call")
    try:
        call()
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    return sorted(context.statusTracker().getJobIdsForGroup(group))


def stage_tasks(spark: SparkSession, call: Callable[[], None]) -> list[int]:
    """The tasks of each Spark stage ``call`` runs on this thread (stages skipped, their
    output reused, are not run and not listed)."""
    tracker = spark.sparkContext.statusTracker()
    tasks = []
    for job_id in spark_jobs(spark, call):
        job = tracker.getJobInfo(job_id)
        assert job is not None
        for stage_id in job.stageIds:
            stage = tracker.getStageInfo(stage_id)
            if stage is not None and stage.numTasks and stage.numCompletedTasks:
                tasks.append(stage.numTasks)
    return tasks
