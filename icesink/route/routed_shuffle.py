"""The shuffle of a routed batch (``route.by`` set): ``write.distribution-mode`` over many tables.

A routed batch stays ONE projection and ONE write job (:mod:`icesink.batch.routed_write`); this
module only chooses which shuffle partition each projected row goes to, from the
projection's slot columns, with the single-table transforms (:mod:`icesink.route.transforms`:
Iceberg's murmur3 bucket ids, days, truncation):

* ``none`` (the routed default): no shuffle; each task splits what it holds by table and
  writes it, so up to tasks x values files per table.
* ``bucket``: every (table, bucket) pair is exactly one shuffle partition. Each table gets
  a range of partitions of its own, at an offset: a table with bucket fields one per
  bucket id of its :class:`~icesink.write.layout.BucketLayout` (its null "bucket" included),
  ``offset + bucket id``; a partitioned table without a bucket field a few, chosen by a
  hash of its partition tuple (:func:`hash_slots`); an unpartitioned table one. So every
  partition value of a batch is written by one task: one file while under the target.
  The shuffle is exact (:func:`~icesink.route.shuffle.exact_repartition`): adaptive execution
  cannot merge or split its partitions. It is read by at most
  :data:`~icesink.route.router.WRITE_TASKS_PER_CORE` tasks per core, each reading whole
  partitions one after the other and closing a (table, bucket)'s files as soon as the next
  one's rows begin (:mod:`icesink.write.routed_task`), as the single-table bucket shuffle does.
* ``hash``: by (table, partition tuple); each value lands in one task, and adaptive
  execution may coalesce the tasks.

Rows flagged bad or unroutable are dropped by the write tasks: they go to partition 0
(``hash``: with key 0) without computing anything of them. The expressions of tables
whose partition fields read the same slots the same way are built once (topics of one
schema into tables of one spec share them). Hot values are not spread over several tasks
here (the single-table :mod:`icesink.route.skew` is), and the small-batch rules of
:class:`~icesink.route.router.BucketRouter` (one task, the driver) do not apply.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.config import DistributionMode
from icesink.log_context import batch_logger
from icesink.route.router import WRITE_TASKS_PER_CORE
from icesink.route.shuffle import exact_repartition
from icesink.route.transforms import partition_value_column
from icesink.spark_session import default_parallelism
from icesink.write.layout import BucketLayout
from icesink.write.routed_task import BAD_ROW_COLUMN, DEST_INDEX_COLUMN, DestinationSpec, RoutedWriteSpec

__all__ = ["RoutedPartitions", "hash_slots", "routed_mode", "routed_partitions", "shuffle_routed"]

logger = batch_logger(__name__)


def routed_mode(modes: Iterable[DistributionMode | None]) -> DistributionMode:
    """The shuffle of a batch from its tables' modes: ``bucket`` if any asks, else ``hash``, else ``none``.

    Unset is ``none`` for a routed table (routed writes were never shuffled by default).
    """
    found = set(modes)
    for mode in (DistributionMode.BUCKET, DistributionMode.HASH):
        if mode in found:
            return mode
    return DistributionMode.NONE


def hash_slots(spark_cores: int) -> int:
    """Partitions of a partitioned table without a bucket field in a ``bucket`` shuffle."""
    return max(1, spark_cores * WRITE_TASKS_PER_CORE)


@dataclass(frozen=True)
class RoutedPartitions:
    """Where the rows of a ``bucket`` shuffle go.

    Attributes:
        partition_ids: Per row, its shuffle partition (an int Column, never null).
        num_partitions: Partitions of the shuffle, every table's together.
        offsets: Destination index -> its first partition.
        layouts: Destination index -> its bucket layout (``None``: hashed or unpartitioned).
    """

    partition_ids: Column
    num_partitions: int
    offsets: dict[int, int]
    layouts: dict[int, BucketLayout | None]


def shuffle_routed(
    rows: DataFrame,
    spec: RoutedWriteSpec,
    mode: DistributionMode,
    *,
    max_write_tasks: int | None = None,
    log: tuple[object, ...] = (None, None),
) -> tuple[DataFrame, RoutedWriteSpec]:
    """The routed projection ``rows`` distributed by ``mode``, and the write spec its tasks need.

    Args:
        rows: The routed projection (``[dest_index, bad_row_flag, slots...]``).
        spec: The write's destinations.
        mode: The batch's distribution (:func:`routed_mode`).
        max_write_tasks: Most tasks reading a ``bucket`` shuffle; by default
            :data:`~icesink.route.router.WRITE_TASKS_PER_CORE` per core of the application.
        log: Batch id and sink id, for the log line.
    """
    if mode is DistributionMode.NONE or not spec.destinations:
        return rows, spec
    columns = [F.col(name) for name in rows.columns]
    if mode is DistributionMode.HASH:
        return rows.repartition(columns[DEST_INDEX_COLUMN], _hash_key(columns, spec.destinations)), spec
    cores = default_parallelism(rows.sparkSession)
    found = routed_partitions(columns, spec.destinations, hash_slots(cores))
    tasks = found.num_partitions
    tasks = min(tasks, max_write_tasks if max_write_tasks is not None else cores * WRITE_TASKS_PER_CORE)
    tasks = max(1, tasks)
    logger.info(
        "batch %s of sink %s: routed bucket shuffle of %s tables into %d partitions, written by %d tasks",
        *log,
        len(spec.destinations),
        found.num_partitions,
        tasks,
    )
    shuffled = exact_repartition(rows, found.partition_ids, found.num_partitions)
    if tasks == found.num_partitions:
        return shuffled, spec
    destinations = tuple(
        dataclasses.replace(d, spec=dataclasses.replace(d.spec, sequential_buckets=found.layouts[d.index]))
        for d in spec.destinations
    )
    return shuffled.coalesce(tasks), dataclasses.replace(spec, destinations=destinations, sequential=True)


def routed_partitions(
    columns: Sequence[Column], destinations: Sequence[DestinationSpec], slots_without_bucket: int
) -> RoutedPartitions:
    """Each destination's range of partitions and every row's partition (see the module).

    Args:
        columns: The projection's columns, by position.
        destinations: The write's destinations, in the order their ranges follow each other.
        slots_without_bucket: Partitions of a partitioned table without a bucket field.
    """
    dest, bad = columns[DEST_INDEX_COLUMN], columns[BAD_ROW_COLUMN]
    offsets: dict[int, int] = {}
    layouts: dict[int, BucketLayout | None] = {}
    by_shape: dict[_Shape, tuple[Column, list[int]]] = {}  # one expression per shared shape
    total = 0
    for d in destinations:
        spec, schema = d.spec.partition_spec, d.spec.schema
        layout = BucketLayout.for_spec(spec, schema)
        size = layout.num_partitions if layout is not None else slots_without_bucket if spec.fields else 1
        offsets[d.index], layouts[d.index] = total, layout
        total += size
        shape = (_shape(d), layout)
        if shape not in by_shape:
            sources = _sources(columns, d, schema)
            if layout is not None:
                value = layout.partition_id(_bucket_columns(spec, schema, sources))
            elif spec.fields:
                partition = _partition_columns(spec, schema, sources)
                value = F.pmod(F.hash(*partition), F.lit(slots_without_bucket))
            else:
                value = F.lit(0)
            by_shape[shape] = (value, [])
        by_shape[shape][1].append(d.index)
    offset = F.try_element_at(F.expr(_array(offsets)), dest + 1)
    partition_ids = offset + _by_destination(dest, by_shape.values())
    partition_ids = F.when(bad, F.lit(0)).otherwise(F.coalesce(partition_ids, F.lit(0)))
    return RoutedPartitions(partition_ids, total, offsets, layouts)


def _hash_key(columns: Sequence[Column], destinations: Sequence[DestinationSpec]) -> Column:
    """A hash of each row's partition tuple in its table (0 for bad rows and unpartitioned tables)."""
    dest, bad = columns[DEST_INDEX_COLUMN], columns[BAD_ROW_COLUMN]
    by_shape: dict[_Shape, tuple[Column, list[int]]] = {}
    for d in destinations:
        spec, schema = d.spec.partition_spec, d.spec.schema
        shape = (_shape(d), None)
        if spec.fields and shape not in by_shape:
            by_shape[shape] = (F.hash(*_partition_columns(spec, schema, _sources(columns, d, schema))), [])
        if spec.fields:
            by_shape[shape][1].append(d.index)
    if not by_shape:
        return F.lit(0)
    return F.when(bad, F.lit(0)).otherwise(F.coalesce(_by_destination(dest, by_shape.values()), F.lit(0)))


_Shape = tuple[tuple[tuple[int, str, str], ...], BucketLayout | None]
"""What a table's expression depends on: per spec field its source slot, transform and type; its layout."""


def _shape(destination: DestinationSpec) -> tuple[tuple[int, str, str], ...]:
    """Per spec field: the projection position of its source, its transform and its source's type."""
    schema = destination.spec.schema
    positions = {f.field_id: p for f, p in zip(schema.fields, destination.slots, strict=True)}
    return tuple(
        (positions[f.source_id], str(f.transform), str(schema.find_field(f.source_id).field_type))
        for f in destination.spec.partition_spec.fields
    )


def _by_destination(dest: Column, values: Iterable[tuple[Column, list[int]]]) -> Column:
    """``CASE`` over the destination index: each value for its destinations (null for others)."""
    result: Column | None = None
    for value, indexes in values:
        when = dest.isin(indexes)
        result = F.when(when, value) if result is None else result.when(when, value)
    assert result is not None
    return result


def _sources(columns: Sequence[Column], destination: DestinationSpec, schema: Schema) -> dict[int, Column]:
    """Field id -> the projection's column of each top-level field of the destination's table."""
    return {f.field_id: columns[p] for f, p in zip(schema.fields, destination.slots, strict=True)}


def _partition_columns(spec: PartitionSpec, schema: Schema, sources: dict[int, Column]) -> list[Column]:
    """Each spec field's partition value, in spec order."""
    return [
        partition_value_column(f.transform, sources[f.source_id], schema.find_field(f.source_id).field_type)
        for f in spec.fields
    ]


def _bucket_columns(spec: PartitionSpec, schema: Schema, sources: dict[int, Column]) -> list[Column]:
    """Each spec field's bucket id, in spec order (other fields, which a layout never reads, a null)."""
    return [
        partition_value_column(f.transform, sources[f.source_id], schema.find_field(f.source_id).field_type)
        if isinstance(f.transform, BucketTransform)
        else F.lit(None)
        for f in spec.fields
    ]


def _array(values: dict[int, int]) -> str:
    """A SQL array literal: position ``i`` holds ``values[i]`` (0 where none)."""
    size = max(values) + 1 if values else 0
    return "array(" + ", ".join(str(values.get(i, 0)) for i in range(max(size, 1))) + ")"
