"""The first-batches timeline reads Spark's scheduler log: jobs, map stage jobs, their tasks."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from benchmarks.first_batches import _spark_jobs

LOG = """\
2026-11-29 03:02:00.451 Got job 1 (collect at /app/workers_ahead.py:58) with 2 output partitions
2026-11-29 03:02:00.452 Final stage: ResultStage 1 (collect at /app/workers_ahead.py:58)
2026-11-29 03:02:00.500 Starting task 0.0 in stage 1.0 (TID 1) (192.0.2.2,executor driver, partition 0)
2026-11-29 03:02:02.811 Got map stage job 2 (start at Native.java:0) with 2 output partitions
2026-11-29 03:02:02.818 Final stage: ShuffleMapStage 2 (start at Native.java:0)
2026-11-29 03:02:04.692 [queryId = 35aaf] [batchId = 0] Starting task 0.0 in stage 2.0 (TID 3) (192.0.2.2)
2026-11-29 03:02:05.111 [queryId = 35aaf] [batchId = 0] Starting task 1.0 in stage 2.0 (TID 4) (192.0.2.2)
2026-11-29 03:02:05.114 ResultStage 1 (collect at /app/workers_ahead.py:58) finished in 4650 ms
a continuation line of a message

2026-11-29 03:02:07.610 ShuffleMapStage 2 (start at Native.java:0) finished in 4771 ms
"""


def test_jobs_and_map_stage_jobs_with_their_first_task_and_end(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    log.write_text(LOG)
    origin = datetime(2026, 11, 29, 3, 2, 0).timestamp()
    first, second = _spark_jobs(log, origin)
    assert (first.number, first.what, first.tasks) == (1, "collect (workers_ahead.py:58)", 2)
    assert (round(first.submitted, 3), round(first.first_task or 0, 3), round(first.finished or 0, 3)) == (
        0.451, 0.5, 5.114,
    )  # fmt: skip
    assert (second.number, second.what, second.tasks) == (2, "start (Native.java:0)", 2)
    assert (round(second.first_task or 0, 3), round(second.finished or 0, 3)) == (4.692, 7.61)
