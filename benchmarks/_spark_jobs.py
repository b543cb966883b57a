"""The Spark jobs a stretch of driver code ran: how long they ran, and how much task time they used.

Spark's driver records every job, stage and task in its status store (what its web UI
shows; the store is kept with the UI off). :class:`SparkJobs` reads it through the JVM
gateway: the jobs with ids above a mark taken before the stretch, and for each of their
stages that ran, the tasks and their summed run time (``executorRunTime``: a task's time
on an executor, a Python worker's time included for ``mapInArrow`` tasks). The jobs' span
is the time during which at least one of them was running; the rest of the stretch the
driver spent outside Spark jobs. Needs a classic SparkSession (not Spark Connect).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

_LISTENER_WAIT_MS = 10_000


@dataclass(frozen=True)
class JobsWindow:
    """The jobs of one stretch of driver code.

    Attributes:
        jobs: Jobs run.
        stages: Stages that ran tasks (stages skipped because their shuffle output existed not counted).
        tasks: Tasks of those stages.
        span_s: Seconds during which at least one of the jobs was running.
        task_s: Task run time summed over the tasks.
        task_cpu_s: Task CPU time summed over the tasks (the JVM's threads only).
    """

    jobs: int
    stages: int
    tasks: int
    span_s: float
    task_s: float
    task_cpu_s: float


class SparkJobs:
    """Reads the jobs run since a mark from ``spark``'s status store."""

    def __init__(self, spark: SparkSession) -> None:
        context: Any = spark.sparkContext
        self._sc = context._jsc.sc()

    def mark(self) -> int:
        """The id of the last job so far (-1: none yet)."""
        jobs = self._jobs()
        return max((int(job.jobId()) for job in jobs), default=-1)

    def since(self, mark: int) -> JobsWindow:
        """The jobs with ids above ``mark`` (each finished: the listener's events are waited for)."""
        jobs = [job for job in self._jobs() if int(job.jobId()) > mark]
        intervals = []
        stage_ids: set[int] = set()
        for job in jobs:
            submitted, completed = job.submissionTime(), job.completionTime()
            if submitted.isDefined() and completed.isDefined():
                intervals.append((submitted.get().getTime(), completed.get().getTime()))
            stage_ids.update(int(s) for s in _iterate(job.stageIds()))
        stages = [self._sc.statusStore().lastStageAttempt(s) for s in sorted(stage_ids)]
        ran = [s for s in stages if s.status().toString() == "COMPLETE"]
        return JobsWindow(
            jobs=len(jobs),
            stages=len(ran),
            tasks=sum(int(s.numCompleteTasks()) for s in ran),
            span_s=_union_ms(intervals) / 1000,
            task_s=sum(int(s.executorRunTime()) for s in ran) / 1000,
            task_cpu_s=sum(int(s.executorCpuTime()) for s in ran) / 1e9,
        )

    def _jobs(self) -> list[Any]:
        self._sc.listenerBus().waitUntilEmpty(_LISTENER_WAIT_MS)
        return list(_iterate(self._sc.statusStore().jobsList(None)))


def _iterate(seq: Any) -> Any:
    """The elements of a Scala ``Seq`` seen through the gateway."""
    iterator = seq.iterator()
    while iterator.hasNext():
        yield iterator.next()


def _union_ms(intervals: list[tuple[int, int]]) -> int:
    """Milliseconds covered by at least one of the ``(start, end)`` intervals."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total
