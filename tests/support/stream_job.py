"""A streaming job for tests that run the sink in a separate process (crashes, concurrency).

Streams the Parquet files of ``--input`` (one file per micro-batch) into the sink with
``trigger(availableNow=True)`` and prints one JSON line with the sink's counters. With
``--crash-at after-write`` or ``after-commit`` and ``--crash-batch N``, the process
kills itself with SIGKILL around the real commit of batch N, like a machine failure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
from typing import Any


def _install_crash(point: str, batch: int) -> None:
    from icesink.commit import committer, staging

    if point == "after-stage":
        real_stage = staging.StagingArea.stage

        def stage(self: Any, staged: Any) -> None:
            real_stage(self, staged)
            if staged.batch_id >= batch:
                os.kill(os.getpid(), signal.SIGKILL)

        staging.StagingArea.stage = stage  # type: ignore[method-assign,assignment]
        return

    real_commit = committer.Committer.commit_batches

    def commit_batches(self: Any, staged: Any, batches: Any, **kwargs: Any) -> Any:
        if point == "after-write" and batches.last >= batch:
            os.kill(os.getpid(), signal.SIGKILL)
        outcome = real_commit(self, staged, batches, **kwargs)
        if point == "after-commit" and batches.last >= batch:
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome

    committer.Committer.commit_batches = commit_batches  # type: ignore[method-assign]

    from icesink.upsert import row_delta  # upsert mode commits through the row delta

    real_row_delta = row_delta.RowDeltaCommitter.commit

    def commit(
        self: Any, data_files: Any, delete_files: Any, start: Any, batches: Any, attempts: Any, *rest: Any
    ) -> Any:
        if point == "after-write" and batches.last >= batch:
            os.kill(os.getpid(), signal.SIGKILL)  # data files and position deletes written, not committed
        outcome = real_row_delta(self, data_files, delete_files, start, batches, attempts, *rest)
        if point == "after-commit" and batches.last >= batch:
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome

    row_delta.RowDeltaCommitter.commit = commit  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--options", required=True, help="sink options as JSON")
    parser.add_argument("--crash-at", choices=["after-write", "after-commit", "after-stage"])
    parser.add_argument("--crash-batch", type=int, default=1)
    parser.add_argument("--queries", type=int, default=1, help="streaming queries sharing the sink")
    args = parser.parse_args(argv)

    from icesink import IcebergSink
    from icesink.jobs.spark import get_spark

    if args.crash_at:
        _install_crash(args.crash_at, args.crash_batch)
    spark = get_spark(
        "icesink-test-job",
        master="local[2]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    sink = IcebergSink.from_options(json.loads(args.options))
    queries = []
    for q in range(args.queries):
        source = args.input if args.queries == 1 else os.path.join(args.input, str(q))
        schema = spark.read.parquet(source).schema
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
        queries.append(
            stream.writeStream.foreachBatch(sink)
            .option("checkpointLocation", os.path.join(args.checkpoint, str(q)))
            .trigger(availableNow=True)
            .start()
        )
    for query in queries:
        query.awaitTermination()
    sink.flush()  # commit what a commit cadence left staged
    registry = sink.metrics.registry
    counters = {
        name: sum(s.value for m in registry.collect() for s in m.samples if s.name == name)
        for name in (
            "icesink_rows_written_total",
            "icesink_replays_skipped_total",
            "icesink_orphan_files_total",
            "icesink_commit_conflicts_total",
            "icesink_commits_total",
            "icesink_deleted_keys_total",
            "icesink_delete_files_total",
        )
    }
    print("ICESINK_JOB_RESULT " + json.dumps(counters), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
