"""Step 3: add the partition-value columns and shuffle rows to their write tasks.

``distribution-mode`` (Iceberg Spark's option of that name) chooses the shuffle:

* ``bucket`` (default when the spec has a bucket field): Spark partition id == bucket id
  (:mod:`sink.route.layout`, :mod:`sink.route.shuffle`). Every shuffle partition holds
  the rows of exactly one bucket, all of them, and the task that reads it fans out over
  the other partition fields (days, ...), so each partition value of a batch under the
  target size is one data file. Adaptive execution cannot coalesce or split these
  partitions. Values far above the target are spread over extra partitions
  (:mod:`sink.route.skew`).

  The write stage reads the shuffle in at most :data:`WRITE_TASKS_PER_CORE` tasks per
  core of the application (``coalesce``, a narrow dependency: no second shuffle), each
  reading whole shuffle partitions one after the other. A Python task costs about 35 ms
  of wall time on a 2-core machine whatever it holds, and 17 of them (16 buckets and the
  null one) cost about as much as the batch's Arrow hand-off; every bucket is still
  read by one task, so the files are the same. The task closes a bucket's files as soon
  as the next bucket's rows begin (:attr:`RoutedBatch.sequential_buckets`), so it holds
  about one bucket at a time, as before.
* ``hash`` (default for specs without a bucket): shuffle by the full partition tuple;
  each value lands in one task, and adaptive execution may coalesce the tasks.
* ``none``: no shuffle; each task writes what it holds, so up to tasks x values files.
  The write tasks compute the partition values themselves (:mod:`sink.write.keys`).

One rule skips the shuffle in ``bucket`` and ``hash`` mode: when the sink's previous
non-empty batch wrote at most :data:`SINGLE_TASK_MAX_BYTES` of data files, and at most
one target file size, the batch is coalesced into one task without a shuffle
(``coalesce(1)``, a narrow dependency). One task then writes every value, one file each
while under the target, which is as few files as the shuffle gives, for the price of one
Python task instead of a shuffle stage and one task per bucket (per-task overhead is
what small batches mostly pay for). A first batch (nothing known yet) is always
shuffled. A batch much larger than the one before it is written by one task too, slower
but with the same files; the batch after it is shuffled again. Below
:data:`DRIVER_MAX_BYTES` the driver writes the batch itself, without a Python task.

A batch that is a single Spark partition (a source that read it in one task) is not
shuffled either: its one task writes one file per value, as many as a shuffle gives.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import IcebergType
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sink.config import DEFAULT_TARGET_FILE_SIZE_BYTES, DistributionMode
from sink.route.layout import BucketLayout
from sink.route.self_check import ensure_self_checks
from sink.route.shuffle import exact_repartition
from sink.route.skew import (
    MAX_HOT_VALUES,
    HotValue,
    RoutingHistory,
    min_rows_to_split,
    needs_measurement,
    plan_splits,
    table_bytes_per_row,
)
from sink.route.transforms import partition_value_column
from sink.schema.names import field_path, spark_column_name
from sink.write.keys import arrow_key_functions

logger = logging.getLogger(__name__)

PARTITION_COLUMN_PREFIX = "__icesink_partition_"
SINGLE_TASK_MAX_BYTES = 16 * 1024 * 1024
"""A batch after one that wrote at most this many bytes (and one target) is written by one task.

Measured on local[2] with the reference workload (``benchmarks/routing_cost.py``): one
task wrote 3.4 MiB of Parquet in 2.0 s where the bucket shuffle took 4.6-8.3 s, 11.6 MiB
in 2.9-4.1 s against 5.3-6.0 s, and broke even near 45 MiB (7 s either way). More cores
favour the shuffle sooner, so the line is drawn well below that.
"""


WRITE_TASKS_PER_CORE = 2
"""Tasks per core of the application that write a bucket shuffle (whole buckets each).

Measured on local[2] with the reference workload read in two tasks (``benchmarks/run.py
--row-groups-per-file 2 --batches 4``, median of 3): 2, 4, 8 and 17 write tasks (17: one
per shuffle partition) took 10.4, 11.0, 11.5 and 12.2 s, with 4.9-5.3, 5.6-6.5, 6.8 and
8.5-9.0 Python-worker CPU seconds; the Parquet sink took 13.3-16.6 s. Two per core
rather than one leave room for buckets of unequal size.
"""


DRIVER_MAX_BYTES = 4 * 1024 * 1024
"""A batch after one that wrote at most this many bytes (and one target) is written by the driver.

It is collected as Arrow (a Spark job without a Python worker) and written in the
driver's process by the same writer the tasks use. On 10,000-row batches of the
reference workload (about 0.5 MiB of Parquet each) that is the cheapest path: no Python
task to schedule, no result to send back (``benchmarks/run.py --scaling``). The driver
then holds one small batch in memory.
"""


@dataclass(frozen=True)
class RoutedBatch:
    """A batch ready for the write tasks.

    Attributes:
        df: Table columns first, then one partition-value column per spec field.
        num_data_columns: How many leading columns are table columns.
        mode: The distribution that was applied.
        num_partitions: Partitions of the bucket shuffle (buckets plus the extra
            partitions of split values); ``None`` without a bucket shuffle.
        single_task: The batch was coalesced into one task instead of shuffled.
        hot_values: Values spread over several tasks (bucket mode).
        layout: The bucket fields behind the partition ids (bucket mode).
        partition_values_in_task: ``df`` has no partition-value columns: the write tasks
            compute them (``none`` mode, when pyarrow can; :mod:`sink.write.keys`).
        in_driver: The batch is small enough to be written by the driver itself
            (:data:`DRIVER_MAX_BYTES`).
        sequential_buckets: The bucket shuffle is read in fewer tasks than it has
            partitions, each task reading whole partitions one after the other: a
            bucket's rows are all in once the next bucket's begin (bucket mode).
    """

    df: DataFrame
    num_data_columns: int
    mode: DistributionMode
    num_partitions: int | None = None
    single_task: bool = False
    hot_values: tuple[HotValue, ...] = ()
    layout: BucketLayout | None = None
    partition_values_in_task: bool = False
    in_driver: bool = False
    sequential_buckets: bool = False

    def task_options(self) -> dict[str, Any]:
        """What the write tasks need to know of the routing (fields of ``WriteSpec``)."""
        return {
            "num_data_columns": self.num_data_columns,
            "partition_values_in_task": self.partition_values_in_task,
            "sequential_buckets": self.layout if self.sequential_buckets else None,
        }


def resolve_mode(requested: DistributionMode | None, spec: PartitionSpec) -> DistributionMode:
    """The distribution to use.

    The requested one; else ``bucket`` when the spec has a bucket field, ``hash`` when it
    has other fields, and ``none`` for an unpartitioned table.
    """
    if requested is not None:
        return requested
    if not spec.fields:
        return DistributionMode.NONE
    if any(isinstance(f.transform, BucketTransform) for f in spec.fields):
        return DistributionMode.BUCKET
    return DistributionMode.HASH


class BucketRouter:
    """Adds partition values as columns and distributes rows by them.

    Args:
        spec: The table's partition spec.
        schema: The table's schema.
        mode: Requested distribution (``None``: chosen from the spec).
        history: What the sink's previous batches wrote (for the skew and single-task
            rules); without it neither rule applies.
        target_file_size_bytes: The target data file size.
        table_bytes_per_row: On-disk bytes per row of the table's data, if any.
        table_name: For logs.
        sink_id: For logs.
        batch_id: For logs.
        max_write_tasks: Most tasks that write a bucket shuffle; by default
            :data:`WRITE_TASKS_PER_CORE` per core of the Spark application.
    """

    def __init__(
        self,
        spec: PartitionSpec,
        schema: Schema,
        mode: DistributionMode | None,
        *,
        history: RoutingHistory | None = None,
        target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
        table_bytes_per_row: float | None = None,
        table_name: str = "",
        sink_id: str | None = None,
        batch_id: int | None = None,
        max_write_tasks: int | None = None,
    ) -> None:
        self._spec = spec
        self._max_write_tasks = max_write_tasks
        self._schema = schema
        self._history = history
        self._target = target_file_size_bytes
        self._table_bpr = table_bytes_per_row
        self._log = (batch_id, sink_id, table_name)
        self.layout = BucketLayout.for_spec(spec, schema)
        self.mode = resolve_mode(mode, spec)
        if self.mode is DistributionMode.BUCKET and self.layout is None:
            if spec.fields:
                logger.warning(
                    "batch %s of sink %s: distribution-mode=bucket but the spec of %s has no bucket "
                    "field; shuffling by the partition tuple (hash) instead",
                    *self._log,
                )
            self.mode = DistributionMode.HASH if spec.fields else DistributionMode.NONE

    @classmethod
    def for_table(
        cls,
        table: Table,
        mode: DistributionMode | None,
        history: RoutingHistory,
        target_file_size_bytes: int,
        *,
        table_name: str,
        sink_id: str,
        batch_id: int,
    ) -> BucketRouter:
        """A router for ``table``'s current spec and schema, with the sink's history."""
        snapshot = table.current_snapshot()
        summary = snapshot.summary.additional_properties if snapshot and snapshot.summary else None
        return cls(
            table.spec(),
            table.schema(),
            mode,
            history=history,
            target_file_size_bytes=target_file_size_bytes,
            table_bytes_per_row=table_bytes_per_row(summary),
            table_name=table_name,
            sink_id=sink_id,
            batch_id=batch_id,
        )

    def route(self, df: DataFrame) -> RoutedBatch:
        """Add the partition columns to ``df`` (already aligned to the table) and distribute it.

        Raises:
            SelfCheckError: The first bucketed batch of the Spark application found the
                bucket hash or the bucket shuffle wrong.
        """
        n = len(df.columns)
        keys_in_task = bool(self._spec.fields) and arrow_key_functions(self._spec, self._schema) is not None
        if self.mode is DistributionMode.NONE and keys_in_task:
            return RoutedBatch(df, n, self.mode, partition_values_in_task=True)
        if keys_in_task and self._single_task_is_enough():
            return self._unshuffled(
                df.coalesce(1), n, "the previous batch was small", partition_values_in_task=True
            )
        if keys_in_task and df.rdd.getNumPartitions() == 1:  # plans the query: ~0.1 s, after the rule above
            # One task holds the whole batch: it writes one file per value (under the
            # target), as many as the shuffle would give, so the shuffle would only cost.
            return self._unshuffled(df, n, "the batch is one Spark partition", partition_values_in_task=True)
        if self.layout is not None:
            shuffle = self.mode is DistributionMode.BUCKET
            ensure_self_checks(df.sparkSession, self._bucket_source_types(), shuffle)
        columns = self._partition_columns()
        routed = df.select("*", *columns) if columns else df
        if not columns or self.mode is DistributionMode.NONE:
            return RoutedBatch(routed, n, self.mode)
        names = [f"{PARTITION_COLUMN_PREFIX}{i}" for i in range(len(columns))]
        partition_columns = [F.col(name) for name in names]
        if self._single_task_is_enough():
            return self._unshuffled(routed.coalesce(1), n, "the previous batch was small")
        if self.mode is DistributionMode.HASH:
            return RoutedBatch(routed.repartition(*partition_columns), n, self.mode)
        assert self.layout is not None
        buckets = self.layout.num_partitions
        salt = _salt_columns(df)
        hot = self._hot_values(routed, names, buckets) if salt else ()
        partition_ids = self.layout.partition_id(partition_columns)
        if hot:
            partition_ids = _spread(partition_ids, hot, partition_columns, salt)
        num_partitions = buckets + sum(h.shares for h in hot)
        # A split value's partitions must stay in tasks of their own to be written at once.
        tasks = num_partitions if hot else self._write_tasks(df, num_partitions)
        logger.info(
            "batch %s of sink %s: bucket shuffle of %s into %d partitions (%s, %d values split), "
            "written by %d tasks",
            *self._log,
            num_partitions,
            self.layout.describe(),
            len(hot),
            tasks,
        )
        shuffled = exact_repartition(routed, partition_ids, num_partitions)
        if tasks >= num_partitions:
            return RoutedBatch(shuffled, n, self.mode, num_partitions, hot_values=hot, layout=self.layout)
        return RoutedBatch(
            shuffled.coalesce(tasks),
            n,
            self.mode,
            num_partitions,
            layout=self.layout,
            sequential_buckets=True,
        )

    def _write_tasks(self, df: DataFrame, num_partitions: int) -> int:
        """How many tasks write the ``num_partitions`` partitions of the bucket shuffle."""
        if self._max_write_tasks is not None:
            return max(1, min(num_partitions, self._max_write_tasks))
        cores = max(1, df.sparkSession.sparkContext.defaultParallelism)
        return min(num_partitions, cores * WRITE_TASKS_PER_CORE)

    def _unshuffled(
        self, df: DataFrame, n: int, why: str, *, partition_values_in_task: bool = False
    ) -> RoutedBatch:
        """The batch written by one writer, without a shuffle: the driver when small, else one task."""
        in_driver = self._driver_is_enough()
        logger.info(
            "batch %s of sink %s: %s; %s writes %s, no shuffle",
            self._log[0],
            self._log[1],
            why,
            "the driver" if in_driver else "one task",
            self._log[2],
        )
        return RoutedBatch(
            df,
            n,
            self.mode,
            single_task=True,
            layout=None if partition_values_in_task else self.layout,
            partition_values_in_task=partition_values_in_task,
            in_driver=in_driver,
        )

    def _partition_columns(self) -> list[Column]:
        columns = []
        for index, field in enumerate(self._spec.fields):
            source = F.col(spark_column_name(field_path(self._schema, field.source_id)))
            source_type = self._schema.find_field(field.source_id).field_type
            column = partition_value_column(field.transform, source, source_type)
            columns.append(column.alias(f"{PARTITION_COLUMN_PREFIX}{index}"))
        return columns

    def _bucket_source_types(self) -> list[IcebergType]:
        return [
            self._schema.find_field(f.source_id).field_type
            for f in self._spec.fields
            if isinstance(f.transform, BucketTransform)
        ]

    def _single_task_is_enough(self) -> bool:
        return self._last_batch_wrote_at_most(SINGLE_TASK_MAX_BYTES)

    def _driver_is_enough(self) -> bool:
        return self._last_batch_wrote_at_most(DRIVER_MAX_BYTES)

    def _last_batch_wrote_at_most(self, limit: int) -> bool:
        """Whether the previous non-empty batch wrote at most ``limit`` bytes and one target."""
        last = self._history.last if self._history is not None else None
        return last is not None and last.file_bytes <= min(limit, self._target)

    def _hot_values(self, routed: DataFrame, names: list[str], first_extra: int) -> tuple[HotValue, ...]:
        """Values of this batch to spread over several tasks; counts them when it may pay off."""
        last = self._history.last if self._history is not None else None
        if self._history is None or not needs_measurement(last, self._table_bpr, self._target):
            return ()
        bytes_per_row = (last.bytes_per_row if last is not None else None) or self._table_bpr
        assert bytes_per_row is not None
        try:
            rows = (
                routed.groupBy(*names)
                .agg(F.count(F.lit(1)).alias("rows"))
                .where(F.col("rows") >= min_rows_to_split(bytes_per_row, self._target))
                .select(F.xxhash64(*[F.col(c) for c in names]).alias("value_hash"), "rows", *names)
                .orderBy(F.desc("rows"))
                .limit(MAX_HOT_VALUES)
                .collect()
            )
        except Exception:  # a bad record (on-bad-record=fail) is reported by the write itself
            logger.warning(
                "batch %s of sink %s: counting rows per partition value of %s failed; not splitting",
                *self._log,
                exc_info=True,
            )
            return ()
        counts = [(r["value_hash"], tuple(r[c] for c in names), r["rows"]) for r in rows]
        hot = plan_splits(counts, bytes_per_row, self._target, first_extra)
        for value in hot:
            logger.info(
                "batch %s of sink %s: partition %s of %s has %d rows (~%d bytes): spread over %d tasks",
                self._log[0],
                self._log[1],
                value.partition,
                self._log[2],
                value.rows,
                int(value.rows * bytes_per_row),
                value.shares,
            )
        return hot


def _spread(
    partition_ids: Column, hot: tuple[HotValue, ...], partition_columns: list[Column], salt: list[Column]
) -> Column:
    """Partition ids with the rows of each hot value spread over its own partitions by ``salt``.

    A hot value is recognised by the ``xxhash64`` of its partition tuple, the same hash
    the count computed; the rows of one value are spread by Spark's hash of their own
    columns (deterministic, so a retried shuffle task sends every row where it went
    before).
    """
    index = F.try_element_at(
        F.create_map(*[x for i, h in enumerate(hot) for x in (F.lit(h.value_hash).cast("long"), F.lit(i))]),
        F.xxhash64(*partition_columns),
    )
    firsts = F.expr("array(" + ", ".join(str(h.first_partition) for h in hot) + ")")
    shares = F.expr("array(" + ", ".join(str(h.shares) for h in hot) + ")")
    spread = F.element_at(firsts, index + 1) + F.pmod(F.hash(*salt), F.element_at(shares, index + 1))
    return F.when(index.isNull(), partition_ids).otherwise(spread)


def _salt_columns(df: DataFrame) -> list[Column]:
    """The top-level primitive columns, whose hash spreads a hot value's rows."""
    nested = (T.ArrayType, T.MapType, T.StructType)
    return [F.col(_quoted(f.name)) for f in df.schema.fields if not isinstance(f.dataType, nested)]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
