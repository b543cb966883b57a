"""Step 3: add the partition-value columns and shuffle rows to their write tasks.

``distribution-mode`` (Iceberg Spark's option of that name) chooses the shuffle:

* ``bucket`` (default when the spec has a bucket field): Spark partition id == bucket id
  (:mod:`icesink.write.layout`, :mod:`icesink.route.shuffle`). Every shuffle partition holds
  the rows of exactly one bucket, all of them, and the task that reads it fans out over
  the other partition fields (days, ...), so each partition value of a batch under the
  target size is one data file. Adaptive execution cannot coalesce or split these
  partitions. Values far above the target are spread over extra partitions
  (:mod:`icesink.route.skew`).

  The write stage reads the shuffle in at most :data:`WRITE_TASKS_PER_CORE` tasks per
  core of the application (``coalesce``, a narrow dependency: no second shuffle), each
  reading whole shuffle partitions one after the other. Every Python task has a fixed
  cost whatever it holds, and one per bucket costs about as much as the batch's Arrow
  hand-off (``benchmarks/README.md``, "Figures behind the code's thresholds"); every bucket
  is still read by one task, so the files are the same. The task closes a bucket's files
  as soon as the next bucket's rows begin (:attr:`RoutedBatch.sequential_buckets`), so it holds
  about one bucket at a time, as before.
* ``hash`` (default for specs without a bucket): shuffle by the full partition tuple;
  each value lands in one task, and adaptive execution may coalesce the tasks.
* ``none``: no shuffle (a ``coalesce`` below moves no row); up to tasks x values files.

Whenever pyarrow can (:mod:`icesink.write.keys`), the write tasks compute the partition
values the files get, and Spark computes them only to shuffle, as expressions: the
shuffle carries no extra column, and Spark's bucket ids decide which task writes a row,
never its partition. No self-check of Spark's bucket hash and shuffle runs then: what
they decide is checked on the files each bucket shuffle wrote (one task per bucket,
:func:`~icesink.route.skew.scattered_bucket`), and should a bucket have reached several
tasks, the sink's later batches are shuffled by hash. Otherwise Spark's values are the
files' too, and the first bucketed batch waits for the self-checks
(:mod:`icesink.route.self_check_runs`); a failure fails it before any file is written.

One rule writes a partitioned batch by one writer, one task or the driver, in every mode,
without a shuffle: after a small batch, or when one task can hold it on two cores
(:mod:`icesink.route.one_task`).

A batch that is a single Spark partition (a source that read it in one task) is not
shuffled either: its one task writes one file per value, as many as a shuffle gives. Nor
is a batch after one whose rows all came from one of its Spark partitions (a file source's
file of one row group: :attr:`~icesink.route.skew.BatchProfile.rows_in_one_partition`).
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.config import DEFAULT_MEMORY_BUDGET_BYTES, DEFAULT_TARGET_FILE_SIZE_BYTES, DistributionMode
from icesink.log_context import batch_logger
from icesink.route.hot_values import count_hot_values, salt_columns, spread
from icesink.route.one_task import DRIVER_MAX_BYTES, SINGLE_TASK_MAX_BYTES, one_task_reason
from icesink.route.routed import RoutedBatch, resolve_mode
from icesink.route.self_check_runs import bucket_source_types, ensure_self_checks
from icesink.route.shuffle import exact_repartition
from icesink.route.skew import HotValue, RoutingHistory, table_bytes_per_row
from icesink.route.transforms import partition_value_column
from icesink.schema.names import field_path, spark_column_name
from icesink.spark_session import default_parallelism, num_partitions
from icesink.write.keys import arrow_key_functions
from icesink.write.layout import BucketLayout

logger = batch_logger(__name__)

PARTITION_COLUMN_PREFIX = "__icesink_partition_"
SOURCE_PARTITION_COLUMN = "__icesink_source_partition"
WRITE_TASKS_PER_CORE = 2
"""Tasks per core of the application that write a bucket shuffle (whole buckets each).

Two per core rather than one leave room for buckets of unequal size; more tasks cost more
Python-worker time for the same files (``benchmarks/README.md``, "Figures behind the code's
thresholds").
"""


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
        memory_budget_bytes: A write task's memory budget (:mod:`icesink.route.one_task`).
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
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
    ) -> None:
        self._spec = spec
        self._memory_budget = memory_budget_bytes
        self._max_write_tasks = max_write_tasks
        self._schema = schema
        self._history = history
        self._last = history.last if history is not None else None  # the previous batch
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
        memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET_BYTES,
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
            memory_budget_bytes=memory_budget_bytes,
        )

    @property
    def _keys_in_task(self) -> bool:  # the write tasks (or the driver) compute the partition values
        return bool(self._spec.fields) and arrow_key_functions(self._spec, self._schema) is not None

    def writes_in_driver(self) -> bool:
        """Whether :meth:`route` has the driver write the next batch (see the module): known before
        the batch is read, so a batch bound for the driver may be collected there at once."""
        return self._keys_in_task and self._last_batch_wrote_at_most(DRIVER_MAX_BYTES)

    def route(self, df: DataFrame, collected: pa.Table | None = None) -> RoutedBatch:
        """Add the partition columns to ``df`` (already aligned to the table) and distribute it.

        ``collected``: ``df``'s rows, in the driver (:meth:`writes_in_driver`), which writes them.

        Raises:
            SelfCheckError: Spark computes the partition values (the write tasks cannot),
                and the first bucketed batch of the Spark application found the bucket
                hash or the bucket shuffle wrong.
        """
        n = len(df.columns)
        if collected is not None:
            return RoutedBatch(
                df,
                n,
                self.mode,
                single_task=True,
                partition_values_in_task=True,
                in_driver=True,
                collected=collected,
            )
        keys_in_task = self._keys_in_task
        why_one = self._one_task_reason(df) if keys_in_task else None
        if why_one is not None:
            return self._unshuffled(df, n, why_one, partition_values_in_task=True)
        if self.mode is DistributionMode.NONE and keys_in_task:
            return RoutedBatch(df, n, self.mode, partition_values_in_task=True)
        if keys_in_task and self._last is not None and self._last.rows_in_one_partition:
            told = _with_source_partition(df)  # its rows tell again where they were
            why = "the previous batch's rows came from one Spark partition"
            return self._unshuffled(told, n, why, partition_values_in_task=True, told=True)
        if keys_in_task and num_partitions(df) == 1:  # plans the query: after the cheaper rules above
            return self._unshuffled(df, n, "the batch is one Spark partition", partition_values_in_task=True)
        if keys_in_task:  # Spark's values only choose the task: they need not wait for the checks
            return self._shuffled(df, n, self._partition_columns(), in_task=True)
        if self.layout is not None:
            shuffle = self.mode is DistributionMode.BUCKET
            ensure_self_checks(df.sparkSession, bucket_source_types(self._spec, self._schema), shuffle)
        columns = self._partition_columns()
        names = [f"{PARTITION_COLUMN_PREFIX}{i}" for i in range(len(columns))]
        aliased = [c.alias(name) for c, name in zip(columns, names, strict=True)]
        routed = df.select("*", *aliased) if columns else df
        why_one = self._one_task_reason(df) if columns else None
        if why_one is not None:
            return self._unshuffled(routed, n, why_one)
        if not columns or self.mode is DistributionMode.NONE:
            return RoutedBatch(routed, n, self.mode)
        return self._shuffled(routed, n, [F.col(name) for name in names], in_task=False)

    def _shuffled(self, df: DataFrame, n: int, partition_columns: list[Column], in_task: bool) -> RoutedBatch:
        """``df`` shuffled by its partition values, ``partition_columns`` in spec order.

        ``in_task``: the columns are expressions over ``df``'s table columns, used only to
        shuffle; the write tasks compute the values the files get.
        """
        mode = self.mode
        scattered = self._history.scattered if self._history is not None else None
        if in_task and mode is DistributionMode.BUCKET and scattered is not None:
            logger.info(
                "batch %s of sink %s: %s is shuffled by hash, as an earlier bucket shuffle gave %s",
                *self._log,
                scattered,
            )
            mode = DistributionMode.HASH
        told = in_task and self._history is not None and self._history.tell_source_partitions()
        routed = _with_source_partition(df) if told else df
        if mode is DistributionMode.HASH:
            shuffled = routed.repartition(*partition_columns)
            return RoutedBatch(
                shuffled, n, mode, partition_values_in_task=in_task, source_partition_column=told
            )
        return self._bucket_shuffle(df, routed, n, partition_columns, told, in_task)

    def _bucket_shuffle(
        self,
        df: DataFrame,
        routed: DataFrame,
        n: int,
        partition_columns: list[Column],
        told: bool,
        in_task: bool,
    ) -> RoutedBatch:
        """Partition id == bucket id (hot values spread over extra partitions), read by few tasks."""
        assert self.layout is not None
        buckets = self.layout.num_partitions
        salt = salt_columns(df)
        hot = self._hot_values(df if in_task else routed, partition_columns, buckets) if salt else ()
        partition_ids = self.layout.partition_id(partition_columns)
        if hot:
            partition_ids = spread(partition_ids, hot, partition_columns, salt)
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
        sequential = tasks < num_partitions
        return RoutedBatch(
            shuffled.coalesce(tasks) if sequential else shuffled,
            n,
            self.mode,
            num_partitions,
            layout=self.layout,
            partition_values_in_task=in_task,
            sequential_buckets=sequential,
            source_partition_column=told,
            bucket_check=self.layout if in_task and not hot else None,
        )

    def _write_tasks(self, df: DataFrame, num_partitions: int) -> int:
        """How many tasks write the ``num_partitions`` partitions of the bucket shuffle."""
        if self._max_write_tasks is not None:
            return max(1, min(num_partitions, self._max_write_tasks))
        cores = default_parallelism(df.sparkSession)
        return min(num_partitions, cores * WRITE_TASKS_PER_CORE)

    def _unshuffled(
        self, df: DataFrame, n: int, why: str, *, partition_values_in_task: bool = False, told: bool = False
    ) -> RoutedBatch:
        """The batch written by one writer, without a shuffle: the driver when small (collecting
        every partition at once), else one task (coalesced into one, a narrow dependency)."""
        in_driver = self._last_batch_wrote_at_most(DRIVER_MAX_BYTES)
        writer = "the driver" if in_driver else "one task"
        logger.info(
            "batch %s of sink %s: %s; %s writes %s, no shuffle", *self._log[:2], why, writer, self._log[2]
        )
        return RoutedBatch(
            df if in_driver else df.coalesce(1),
            n,
            self.mode,
            single_task=True,
            layout=None if partition_values_in_task else self.layout,
            partition_values_in_task=partition_values_in_task,
            in_driver=in_driver,
            source_partition_column=told,
        )

    def _partition_columns(self) -> list[Column]:
        """The partition value of each spec field, as a Spark expression over the table columns."""
        columns = []
        for field in self._spec.fields:
            source = F.col(spark_column_name(field_path(self._schema, field.source_id)))
            source_type = self._schema.find_field(field.source_id).field_type
            columns.append(partition_value_column(field.transform, source, source_type))
        return columns

    def _one_task_reason(self, df: DataFrame) -> str | None:
        small = self._last_batch_wrote_at_most(SINGLE_TASK_MAX_BYTES)  # on any number of cores
        return one_task_reason(df, self._last, small, self._memory_budget, self._target)

    def _hot_values(
        self, df: DataFrame, partition_columns: list[Column], first_extra: int
    ) -> tuple[HotValue, ...]:
        """Values of this batch to spread over several tasks (see :func:`count_hot_values`)."""
        if self._history is None:
            return ()
        return count_hot_values(
            df, partition_columns, first_extra, self._history, self._table_bpr, self._target, self._log
        )

    def _last_batch_wrote_at_most(self, limit: int) -> bool:
        """Whether the previous non-empty batch wrote at most ``limit`` bytes and one target."""
        return self._last is not None and self._last.file_bytes <= min(limit, self._target)


def _with_source_partition(df: DataFrame) -> DataFrame:
    """``df`` with the Spark partition each row is in, as the last column."""
    return df.select("*", F.spark_partition_id().alias(SOURCE_PARTITION_COLUMN))
