"""A routed sink's ``write.distribution-mode``: its tables' files read back, and where rows were shuffled.

As in ``test_bucket_shuffle.py``, a data file's name carries the write task that wrote it
and its manifest entry its partition tuple, so the tables show what every task received.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import IntegerType, NestedField, StringType, TimestampType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from icesink.config import DistributionMode
from icesink.errors import ConfigError
from icesink.route.routed_shuffle import shuffle_routed
from icesink.write.layout import BucketLayout
from icesink.write.routed_task import DestinationSpec, RoutedWriteSpec
from tests.integration.test_bucket_shuffle import Written, tasks_by_bucket, written
from tests.support.spark_conf import session_conf
from tests.support.tables import catalog_from_options, check_data_files, table_rows
from tests.unit.writer_fixtures import task_spec

ROWS = 24_000
INPUT_PARTITIONS = 3
NULL_TYPES = 7  # rows without a destination value: dead letters
PARTITION_BY = {
    "a": "bucket(4, k)",
    "b": "bucket(3, s)",
    "c": "day(ts), bucket(2, k)",
    "d": "day(ts)",  # no bucket field: a few partitions by its partition tuple
    "e": None,  # unpartitioned: one partition
}


SMALL_ARROW_BATCHES = {"spark.sql.execution.arrow.maxRecordsPerBatch": "100"}


def _events(spark: SparkSession) -> DataFrame:
    """Rows of five types over three days; some ``k`` and ``s`` null (null buckets), some types null."""
    types = F.array(*[F.lit(t) for t in PARTITION_BY])
    return spark.range(0, ROWS, numPartitions=INPUT_PARTITIONS).select(
        "id",
        F.when(F.col("id") < NULL_TYPES, None)
        .otherwise(F.element_at(types, (F.col("id") % len(PARTITION_BY) + 1).cast("int")))
        .alias("type"),
        F.when(F.col("id") % 13 == 0, None).otherwise((F.col("id") * 7 % 101).cast("int")).alias("k"),
        F.when(F.col("id") % 11 == 0, None).otherwise(F.concat(F.lit("s"), F.col("id") % 89)).alias("s"),
        F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id") * 43).cast("timestamp_ntz").alias("ts"),
    )


def _bucket_of(layout: BucketLayout, f: Written) -> int:
    return layout.partition_of(f.partition)


def _sink(catalog_options: dict[str, str], namespace: str, mode: str, **more: str) -> IcebergSink:
    overrides = {f"{namespace}.{t}": {"partition-by": p} for t, p in PARTITION_BY.items() if p}
    options = {
        "sink-id": namespace,
        "route.by": "field",
        "route.field": "type",
        "route.table-template": f"{namespace}.{{value}}",
        "route.table-options": str(overrides).replace("'", '"'),
        "distribution-mode": mode,
    }
    return IcebergSink.from_options({**catalog_options, **options, **more})


@pytest.mark.parametrize("mode", ["bucket", "hash"])
def test_each_partition_value_of_each_table_is_one_file(
    spark: SparkSession, catalog_options: dict[str, str], mode: str
) -> None:
    """bucket: each (table, bucket) read by one task; both: one file per value (none: up to 3 per value)."""
    namespace = f"shuffled_{mode}"
    # bucket: small Arrow batches and chunks (of 32 KiB), so that a task's buckets span several
    # chunks and it finishes each bucket's files while the next one's rows arrive (a bucket
    # finished too early: a second file). Not for hash: the budget would close its files.
    small = {"write.fanout.memory-budget-bytes": str(1 << 20)} if mode == "bucket" else {}
    conf = SMALL_ARROW_BATCHES if mode == "bucket" else {}
    with _sink(catalog_options, namespace, mode, **small) as sink, session_conf(spark, conf):
        sink(_events(spark), 0)
    catalog = catalog_from_options(catalog_options)
    values_per_task: dict[int, set[tuple[str, Any]]] = {}
    for kind, partition_by in PARTITION_BY.items():
        table = catalog.load_table(f"{namespace}.{kind}")
        files = written(table)
        expected = sum(
            1 for i in range(NULL_TYPES, ROWS) if i % len(PARTITION_BY) == list(PARTITION_BY).index(kind)
        )
        assert len(table_rows(table)) == sum(f.records for f in files) == expected, kind
        assert check_data_files(table) == len(files)
        values = {f.partition for f in files}
        for f in files:
            values_per_task.setdefault(f.task, set()).add((kind, f.partition))
        repeated = [p for p, n in Counter(f.partition for f in files).items() if n > 1]
        assert len(files) == len(values), (kind, repeated)  # one file per value
        layout = BucketLayout.for_spec(table.spec(), table.schema())
        assert (layout is not None) == ("bucket" in (partition_by or ""))
        if mode == "bucket" and layout is not None:
            buckets = tasks_by_bucket(files, functools.partial(_bucket_of, layout))
            assert len(buckets) == layout.num_partitions  # every bucket, the null one too
            assert all(len(tasks) == 1 for tasks in buckets.values()), (kind, buckets)
    dead = table_rows(catalog.load_table(f"{namespace}.routed__dlq"))
    assert len(dead) == NULL_TYPES
    if mode == "bucket":  # 17 partitions in 4 tasks, each holding about one bucket's writers at once
        registry = sink.metrics.registry
        peak = max(
            registry.get_sample_value("icesink_open_writers_max", {"table": f"{namespace}.{k}"}) or 0
            for k in PARTITION_BY
        )
        most = max(len(v) for v in values_per_task.values())
        assert len(values_per_task) == 4 and 0 < peak < most, (peak, most)


def test_the_shuffle_partition_of_a_row_is_its_tables_offset_plus_its_bucket(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Read before any write: Spark's partition id of every row against pyiceberg's bucket of its value."""
    schemas = {
        "a": Schema(
            NestedField(1, "k", IntegerType(), required=False),
            NestedField(2, "s", StringType(), required=False),
        ),
        "c": Schema(
            NestedField(1, "ts", TimestampType(), required=False),
            NestedField(2, "k", IntegerType(), required=False),
        ),
    }
    specs = {
        "a": PartitionSpec(PartitionField(2, 1000, BucketTransform(5), "s_bucket")),
        "c": PartitionSpec(
            PartitionField(1, 1000, DayTransform(), "ts_day"),
            PartitionField(2, 1001, BucketTransform(3), "k_bucket"),
        ),
    }
    # The projection: [dest, bad, slot k, slot s, slot ts]; a reads (k, s), c reads (ts, k).
    destinations = (
        DestinationSpec(0, task_spec(tmp_path, "a", schemas["a"], specs["a"], "p"), (2, 3)),
        DestinationSpec(1, task_spec(tmp_path, "c", schemas["c"], specs["c"], "p"), (4, 2)),
    )
    rows = spark.range(0, 2_000, numPartitions=2).select(
        (F.col("id") % 2).cast("int").alias("dest"),
        (F.col("id") % 50 == 0).alias("bad"),
        (F.col("id") * 31 % 997).cast("int").alias("k"),
        F.when(F.col("id") % 17 == 0, None)
        .otherwise(F.concat(F.lit("v"), F.col("id").cast("string")))
        .alias("s"),
        F.timestamp_seconds(F.col("id") * 600).cast("timestamp_ntz").alias("ts"),
    )
    spec = RoutedWriteSpec(destinations, 64 << 20)
    shuffled, _ = shuffle_routed(rows, spec, DistributionMode.BUCKET, max_write_tasks=10_000)
    got = shuffled.select(F.spark_partition_id().alias("p"), "dest", "bad", "k", "s").collect()
    bucket_a, bucket_c = (
        BucketTransform(5).transform(StringType()),
        BucketTransform(3).transform(IntegerType()),
    )
    offsets = {0: 0, 1: 5 + 1}  # a: 5 buckets and its null one
    seen: dict[int, set[Any]] = {}
    for r in got:
        if r.bad:
            assert r.p == 0  # dropped by the write task: nothing computed of it
            continue
        found = (bucket_a(r.s) if r.s is not None else None) if r.dest == 0 else bucket_c(r.k)
        bucket = 5 if found is None else found  # a's null s: its null bucket
        assert r.p == offsets[r.dest] + bucket, r
        seen.setdefault(r.dest, set()).add(bucket)
    assert seen == {0: set(range(6)), 1: set(range(3))}
    assert shuffled.rdd.getNumPartitions() == 6 + 4  # c: 3 buckets and its null one (k is optional)


@pytest.mark.parametrize("mode", ["range", "bucketed"])
def test_an_unknown_mode_of_a_routed_sink_is_refused_naming_the_accepted_ones(
    catalog_options: dict[str, str], mode: str
) -> None:
    with pytest.raises(ConfigError, match=rf"invalid value '{mode}' for option 'distribution-mode'") as e:
        _sink(catalog_options, "refused", mode)
    assert "['bucket', 'hash', 'none']" in str(e.value)
