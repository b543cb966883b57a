"""A task with thousands of open partition writers stays inside its memory budget."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sink import IcebergSink
from tests.support.tables import data_files

MiB = 1024 * 1024
PARTITIONS = 2000
ROWS = 1_000_000


def test_two_thousand_partition_values_in_one_task(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    budget = 64 * MiB
    options = {
        **catalog_options,
        "table": "db.fanout",
        "sink-id": "fanout",
        "partition-by": "p",
        "distribution-mode": "none",
        "write.fanout.memory-budget-bytes": str(budget),
    }
    sink = IcebergSink.from_options(options)
    # One task; rows cycle through all 2000 partition values, so every writer stays open.
    # About 150 MiB of Arrow data: without the budget, all of it would be buffered at once.
    df = spark.range(0, ROWS, numPartitions=1).select(
        F.col("id"),
        (F.col("id") % PARTITIONS).cast("int").alias("p"),
        F.sha2(F.col("id").cast("string"), 256).alias("h"),
        F.rand(3).alias("r"),
    )
    sink(df, 0)
    table = sink.catalog.load_table("db.fanout")
    files = data_files(table)
    assert sum(f.record_count for f in files) == ROWS
    assert len({f.partition[0] for f in files}) == PARTITIONS
    ids = table.scan(selected_fields=("id",)).to_arrow().column("id")
    assert ids.length() == ROWS and len(set(ids.to_pylist())) == ROWS
    registry = sink.metrics.registry
    buffered = registry.get_sample_value("icesink_buffered_bytes_max", {"table": "db.fanout"})
    peak_rss = registry.get_sample_value("icesink_task_peak_rss_bytes", {"table": "db.fanout"})
    assert buffered is not None and buffered <= budget * 1.05  # one batch over, at most, before a close
    assert peak_rss is not None and 0 < peak_rss < budget + 300 * MiB, peak_rss / MiB
