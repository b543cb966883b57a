"""One write task with thousands of partition values, in a Spark of its own.

Python workers are reused across tasks, so a worker of the shared test session
carries whatever earlier tests imported and allocated. This job starts a fresh
local Spark, writes ``--rows`` rows cycling through ``--partitions`` values in a
single task, and prints one JSON line with the task's memory metrics.
"""

from __future__ import annotations

import argparse
import json

from pyspark.sql import functions as F

from icesink import IcebergSink
from icesink.jobs.spark import get_spark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--catalog-uri", required=True)
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--table", default="db.fanout")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--budget-bytes", type=int, required=True)
    args = parser.parse_args()

    spark = get_spark("icesink-fanout-job", master="local[1]", conf={"spark.ui.enabled": "false"})
    sink = IcebergSink.from_options(
        {
            "catalog.name": "test",
            "catalog.type": "sql",
            "catalog.uri": args.catalog_uri,
            "catalog.warehouse": args.warehouse,
            "table": args.table,
            "sink-id": "fanout",
            "partition-by": "p",
            "distribution-mode": "none",
            "write.fanout.memory-budget-bytes": str(args.budget_bytes),
        }
    )
    # Rows cycle through every partition value, so every writer stays open to the end.
    df = spark.range(0, args.rows, numPartitions=1).select(
        F.col("id"),
        (F.col("id") % args.partitions).cast("int").alias("p"),
        F.sha2(F.col("id").cast("string"), 256).alias("h"),
        F.rand(3).alias("r"),
    )
    sink(df, 0)
    labels = {"table": args.table}
    registry = sink.metrics.registry
    metrics = {
        name: registry.get_sample_value(f"icesink_{name}", labels)
        for name in ("buffered_bytes_max", "task_peak_rss_bytes", "open_writers_max")
    }
    print(json.dumps(metrics), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
