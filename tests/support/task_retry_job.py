"""A job for tests of task retries: a write task dies after its files are written, Spark retries it.

Runs one batch through the sink (``sink(batch_df, 0)``) on ``local[2,2]`` (a failed task is
tried again once). The first attempt of the write task of Spark partition 0 writes and
closes all its files, then fails, as an executor killed at that moment would: its files
stay behind under the batch attempt's folder. Prints one JSON line with the files the
commit found there and deleted.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any


def _install_task_failure() -> None:
    from icesink.write import task

    real_write_function = task.write_function

    def write_function(spec: Any, before: Any = None) -> Any:
        run = real_write_function(spec, before)

        def run_then_die(batches: Iterator[Any]) -> Iterator[Any]:
            from pyspark import TaskContext

            messages = list(run(batches))  # every file written and closed
            context = TaskContext.get()
            if context is not None and context.partitionId() == 0 and context.attemptNumber() == 0:
                raise RuntimeError("injected: the executor dies after writing its files")
            yield from messages

        return run_then_die

    task.write_function = write_function


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--options", required=True, help="sink options as JSON")
    parser.add_argument("--rows", type=int, default=4000)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from icesink import IcebergSink
    from icesink.commit import committer
    from icesink.jobs.spark import get_spark

    _install_task_failure()
    discarded: list[str] = []
    real_commit = committer.Committer.commit_batches

    def commit_batches(self: Any, staged: Any, batches: Any, **kwargs: Any) -> Any:
        outcome = real_commit(self, staged, batches, **kwargs)
        discarded.extend(outcome.discarded_files)
        return outcome

    committer.Committer.commit_batches = commit_batches  # type: ignore[method-assign]
    spark = get_spark(
        "icesink-task-retry-job",
        master="local[2,2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    sink = IcebergSink.from_options(json.loads(args.options))
    sink(spark.range(0, args.rows).select("id", F.lit("x").alias("v")), 0)
    print("ICESINK_JOB_RESULT " + json.dumps({"discarded": discarded}), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
