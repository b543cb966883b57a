"""A streaming job for the schema evolution tests: one query, started on a signal.

Streams the Parquet files of ``--input`` (one file per micro-batch) into the sink with
``trigger(availableNow=True)``. Spark and the sink are set up first; then the job
touches ``--ready`` and waits for ``--go`` to exist, so the test can release several
processes (and its own queries) at the same moment. Prints one JSON line with the
sink's schema counters.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

_COUNTERS = (
    "icesink_rows_written_total",
    "icesink_schema_lock_acquisitions_total",
    "icesink_schema_commit_conflicts_total",
    "icesink_schema_changes_total",
    "icesink_commit_conflicts_total",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--options", required=True, help="sink options as JSON")
    parser.add_argument("--ready", required=True, help="file to create once set up")
    parser.add_argument("--go", required=True, help="file to wait for before streaming")
    args = parser.parse_args(argv)

    from icesink import IcebergSink
    from icesink.jobs.spark import get_spark

    spark = get_spark(
        "icesink-test-job",
        master="local[1]",
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
    )
    spark.sparkContext.setLogLevel("ERROR")
    sink = IcebergSink.from_options(json.loads(args.options))
    schema = spark.read.parquet(args.input).schema
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(args.input)
    Path(args.ready).touch()
    deadline = time.monotonic() + 300
    while not Path(args.go).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{args.go} never appeared")
        time.sleep(0.02)
    query = (
        stream.writeStream.foreachBatch(sink)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    registry = sink.metrics.registry
    counters = {
        name: sum(s.value for m in registry.collect() for s in m.samples if s.name == name)
        for name in _COUNTERS
    }
    print("ICESINK_JOB_RESULT " + json.dumps(counters), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
