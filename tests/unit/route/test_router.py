"""The router: distribution modes, the bucket layout, and where each row is sent."""

from __future__ import annotations

from typing import Any

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform, Transform
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType, TimestampType
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink.config import DistributionMode
from icesink.route.router import SOURCE_PARTITION_COLUMN, BucketRouter, resolve_mode
from icesink.route.skew import RoutingHistory
from icesink.write.layout import BucketLayout
from icesink.write.messages import DataFileMessage

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "i", IntegerType(), required=False),
    NestedField(3, "s", StringType(), required=False),
    NestedField(4, "ts", TimestampType(), required=False),
    NestedField(5, "st", StructType(NestedField(6, "k", IntegerType(), required=True)), required=False),
)


def spec(*fields: tuple[int, Transform[Any, Any]]) -> PartitionSpec:
    return PartitionSpec(
        *[
            PartitionField(source, 1000 + n, transform, f"p{n}")
            for n, (source, transform) in enumerate(fields)
        ]
    )


def test_default_modes() -> None:
    assert resolve_mode(None, spec()) is DistributionMode.NONE
    assert resolve_mode(None, spec((4, DayTransform()))) is DistributionMode.HASH
    assert resolve_mode(None, spec((4, DayTransform()), (1, BucketTransform(8)))) is DistributionMode.BUCKET
    assert resolve_mode(DistributionMode.NONE, spec((1, BucketTransform(8)))) is DistributionMode.NONE


def test_bucket_mode_without_a_bucket_field_shuffles_by_hash() -> None:
    router = BucketRouter(spec((3, IdentityTransform())), SCHEMA, DistributionMode.BUCKET)
    assert router.mode is DistributionMode.HASH
    assert BucketRouter(spec(), SCHEMA, DistributionMode.BUCKET).mode is DistributionMode.NONE


def test_layout_one_bucket_field_required_and_optional() -> None:
    required = BucketLayout.for_spec(spec((4, DayTransform()), (1, BucketTransform(16))), SCHEMA)
    assert required is not None and required.num_partitions == 16
    optional = BucketLayout.for_spec(spec((2, BucketTransform(16))), SCHEMA)
    assert optional is not None and optional.num_partitions == 17  # slot 16 is the null "bucket"
    assert optional.partition_of((None,)) == 16
    nested = BucketLayout.for_spec(spec((6, BucketTransform(4))), SCHEMA)
    assert nested is not None and nested.slots[0].nullable  # required, but inside an optional struct


def test_layout_combines_bucket_fields_in_mixed_radix() -> None:
    layout = BucketLayout.for_spec(
        spec((1, BucketTransform(2)), (4, DayTransform()), (2, BucketTransform(3))), SCHEMA
    )
    assert layout is not None
    assert [(s.position, s.slots) for s in layout.slots] == [(0, 2), (2, 4)]
    ids = {layout.partition_of((b1, 19000, b2)) for b1 in range(2) for b2 in [0, 1, 2, None]}
    assert ids == set(range(8)) and layout.num_partitions == 8


def test_layout_caps_the_number_of_partitions() -> None:
    layout = BucketLayout.for_spec(spec((1, BucketTransform(1000)), (3, BucketTransform(1000))), SCHEMA)
    assert layout is not None and [s.position for s in layout.slots] == [0]
    assert layout.num_partitions == 1000


def test_partition_id_column_matches_partition_of(spark: SparkSession) -> None:
    layout = BucketLayout.for_spec(spec((1, BucketTransform(2)), (2, BucketTransform(3))), SCHEMA)
    assert layout is not None
    tuples = [(b1, b2) for b1 in range(2) for b2 in [0, 1, 2, None]]
    df = spark.createDataFrame(tuples, "a int, b int")
    ids = df.select("a", "b", layout.partition_id([F.col("a"), F.col("b")]).alias("pid")).collect()
    assert {(r["a"], r["b"]): r["pid"] for r in ids} == {t: layout.partition_of(t) for t in tuples}


def frame(spark: SparkSession, n: int = 400) -> Any:
    return spark.range(0, n, numPartitions=3).select(
        F.col("id"),
        F.when(F.col("id") % 10 == 0, None).otherwise((F.col("id") * 7 % 101).cast("int")).alias("i"),
        F.concat(F.lit("v"), (F.col("id") % 13).cast("string")).alias("s"),
        F.timestamp_seconds(F.col("id") * 3600).cast("timestamp_ntz").alias("ts"),
        F.struct((F.col("id") % 5).cast("int").alias("k")).alias("st"),
    )


def buckets_by_task(df: Any) -> dict[int, set[int | None]]:
    """The Iceberg buckets of ``i`` (``bucket(8, i)``) in each Spark partition of ``df``."""
    bucket = BucketTransform(8).transform(IntegerType())
    return {
        task: {None if i is None else bucket(i) for (i,) in values}
        for task, values in tasks_of(df, ["i"]).items()
    }


def tasks_of(df: Any, columns: list[str]) -> dict[int, set[tuple[Any, ...]]]:
    rows = df.select(F.spark_partition_id().alias("task"), *columns).distinct().collect()
    tasks: dict[int, set[tuple[Any, ...]]] = {}
    for r in rows:
        tasks.setdefault(r["task"], set()).add(tuple(r[c] for c in columns))
    return tasks


def test_bucket_mode_sends_bucket_b_to_partition_b(spark: SparkSession) -> None:
    router = BucketRouter(
        spec((4, DayTransform()), (2, BucketTransform(8))), SCHEMA, None, max_write_tasks=100
    )
    routed = router.route(frame(spark))
    assert routed.mode is DistributionMode.BUCKET and routed.num_partitions == 9
    assert not routed.sequential_buckets  # a task per shuffle partition
    # The write tasks compute the values (no column for them): the task of each bucket of i.
    assert routed.partition_values_in_task and routed.df.columns == frame(spark).columns
    tasks = buckets_by_task(routed.df)
    assert tasks == {b: {b if b < 8 else None} for b in tasks}
    assert 8 in tasks  # the null "bucket" has its own partition
    assert routed.df.count() == 400


def test_the_bucket_shuffle_is_written_by_two_tasks_per_core_each_reading_whole_buckets(
    spark: SparkSession,
) -> None:
    routed = BucketRouter(spec((4, DayTransform()), (2, BucketTransform(8))), SCHEMA, None).route(
        frame(spark)
    )
    cores = spark.sparkContext.defaultParallelism
    assert routed.num_partitions == 9 and routed.sequential_buckets
    assert routed.df.rdd.getNumPartitions() == min(9, 2 * cores)
    buckets = [b for values in buckets_by_task(routed.df).values() for b in values]
    assert sorted(buckets, key=lambda b: -1 if b is None else b) == [None, *range(8)]  # each in one task
    assert routed.task_options()["sequential_buckets"] == routed.layout
    assert routed.df.count() == 400


def test_single_task_after_a_small_batch(spark: SparkSession) -> None:
    history = RoutingHistory()
    history.record(
        [DataFileMessage(path="f", partition=(1,), spec_id=0, record_count=400, file_size_bytes=9000)]
    )
    router = BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None, history=history)
    routed = router.route(frame(spark))
    assert routed.single_task and routed.in_driver  # 9,000 bytes: the driver writes it
    assert router.writes_in_driver()  # known before the batch is read
    assert routed.df.rdd.getNumPartitions() == 3  # collected a task a core, not coalesced into one
    medium = RoutingHistory()
    medium.record(
        [DataFileMessage(path="f", partition=(1,), spec_id=0, record_count=400, file_size_bytes=8 * 2**20)]
    )
    router = BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None, history=medium)
    routed = router.route(frame(spark))
    assert routed.single_task and not routed.in_driver and not router.writes_in_driver()
    assert routed.df.rdd.getNumPartitions() == 1  # one task writes it
    large = RoutingHistory()
    large.record(
        [DataFileMessage(path="f", partition=(1,), spec_id=0, record_count=400, file_size_bytes=10**9)]
    )
    assert (
        not BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None, history=large)
        .route(frame(spark))
        .single_task
    )


def test_a_batch_in_one_spark_partition_is_not_shuffled(spark: SparkSession) -> None:
    one = frame(spark).coalesce(1)
    cases: list[tuple[tuple[int, Transform[Any, Any]], ...]] = [
        ((2, BucketTransform(8)),),
        ((4, DayTransform()), (3, IdentityTransform())),
    ]
    for transforms in cases:
        routed = BucketRouter(spec(*transforms), SCHEMA, None).route(one)
        assert routed.single_task and routed.partition_values_in_task and not routed.in_driver
        assert routed.df.columns == one.columns  # nothing added: the task computes the values
        assert routed.df.rdd.getNumPartitions() == 1
    # two partitions: the shuffle gives fewer files, so it stays
    assert BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None).route(frame(spark)).num_partitions == 9


def history_of(source_partitions: set[int], file_bytes: int = 10**9) -> RoutingHistory:
    history = RoutingHistory()
    message = DataFileMessage(
        path="f", partition=(1,), spec_id=0, record_count=400, file_size_bytes=file_bytes
    )
    history.record([message], frozenset(source_partitions))
    return history


def rows_per_partition(df: Any, column: Any) -> dict[int, int]:
    return {r["p"]: r["count"] for r in df.groupBy(column.alias("p")).count().collect()}


def test_a_batch_after_one_whose_rows_came_from_one_partition_is_written_by_one_task(
    spark: SparkSession,
) -> None:
    batch = frame(spark)  # three Spark partitions
    cases: list[tuple[tuple[int, Transform[Any, Any]], ...]] = [
        ((2, BucketTransform(8)),),
        ((4, DayTransform()), (3, IdentityTransform())),
    ]
    for transforms in cases:
        routed = BucketRouter(spec(*transforms), SCHEMA, None, history=history_of({1})).route(batch)
        assert routed.single_task and routed.partition_values_in_task and not routed.in_driver
        assert routed.df.rdd.getNumPartitions() == 1 and routed.task_options()["source_partition_column"]
        # The last column is each row's Spark partition before the coalesce: the task reports them.
        assert routed.df.columns[-1] == SOURCE_PARTITION_COLUMN and len(routed.df.columns) == 6
        expected = rows_per_partition(batch, F.spark_partition_id())
        assert rows_per_partition(routed.df, F.col(SOURCE_PARTITION_COLUMN)) == expected
        assert len(expected) == 3
    bucket8 = spec((2, BucketTransform(8)))
    # The first batch: the shuffle, whose tasks are told where each row came from.
    shuffled = BucketRouter(bucket8, SCHEMA, None, history=RoutingHistory()).route(batch)
    assert shuffled.num_partitions == 9 and not shuffled.single_task
    assert shuffled.source_partition_column and shuffled.df.columns[-1] == SOURCE_PARTITION_COLUMN
    expected = rows_per_partition(batch, F.spark_partition_id())
    assert rows_per_partition(shuffled.df, F.col(SOURCE_PARTITION_COLUMN)) == expected
    # Rows from several partitions last time: the shuffle, not told again for a while.
    again = BucketRouter(bucket8, SCHEMA, None, history=history_of({0, 2})).route(batch)
    assert again.num_partitions == 9 and not again.source_partition_column
    assert SOURCE_PARTITION_COLUMN not in again.df.columns
    # Without a history (a dead-letter write) nobody would read it: no column.
    plain = BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None).route(batch)
    assert not plain.source_partition_column and SOURCE_PARTITION_COLUMN not in plain.df.columns
    # A small previous batch: the cheaper small-batch rule comes first, with no column.
    small = BucketRouter(spec((2, BucketTransform(8))), SCHEMA, None, history=history_of({1}, 9000))
    routed = small.route(batch)
    assert routed.in_driver and not routed.source_partition_column


def test_on_two_cores_a_batch_one_task_holds_is_written_by_one_task(spark: SparkSession) -> None:
    """Above the small-batch line, under one target, rows a task holds: one task, not the shuffle."""
    assert spark.sparkContext.defaultParallelism <= 2
    message = DataFileMessage(
        path="f", partition=(1,), spec_id=0, record_count=400_000, file_size_bytes=10**8
    )
    bucket8 = spec((2, BucketTransform(8)))
    for row_bytes, budget, one_task in [(100, 2**30, True), (100, 2**26, False), (0, 2**30, False)]:
        history = RoutingHistory()
        history.record([message], input_row_bytes=row_bytes)  # 40 MB of Arrow rows (0: width unknown)
        routed = BucketRouter(bucket8, SCHEMA, None, history=history, memory_budget_bytes=budget).route(
            frame(spark)
        )
        assert routed.single_task is one_task, (row_bytes, budget)
        assert routed.df.rdd.getNumPartitions() == (1 if one_task else min(9, 2 * 2))
        assert not routed.in_driver and routed.partition_values_in_task
        assert routed.df.count() == 400


def test_none_mode_follows_the_one_task_rule_past_the_first_batch(spark: SparkSession) -> None:
    """``none`` keeps the source's tasks for a first batch, and coalesces a batch one task holds."""
    assert spark.sparkContext.defaultParallelism <= 2
    bucket8 = spec((2, BucketTransform(8)))
    batch = frame(spark)  # three Spark partitions
    first = BucketRouter(bucket8, SCHEMA, DistributionMode.NONE, history=RoutingHistory()).route(batch)
    assert not first.single_task and first.df is batch  # nothing known: the rows stay where they are
    message = DataFileMessage(
        path="f", partition=(1,), spec_id=0, record_count=400_000, file_size_bytes=10**8
    )
    for row_bytes, one_task in [(100, True), (0, False)]:
        history = RoutingHistory()
        history.record([message], input_row_bytes=row_bytes)  # 40 MB of Arrow rows (0: width unknown)
        routed = BucketRouter(bucket8, SCHEMA, DistributionMode.NONE, history=history).route(batch)
        assert routed.mode is DistributionMode.NONE and routed.single_task is one_task, row_bytes
        assert routed.df.rdd.getNumPartitions() == (1 if one_task else 3)
        assert routed.partition_values_in_task and not routed.in_driver
        assert routed.num_partitions is None and routed.df.columns == batch.columns  # no shuffle, no column
        assert routed.df.count() == 400
