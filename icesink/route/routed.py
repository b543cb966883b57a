"""What the route step hands to the write step: a batch and how it was distributed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.transforms import BucketTransform
from pyspark.sql import DataFrame

from icesink.config import DistributionMode
from icesink.write.layout import BucketLayout

__all__ = ["RoutedBatch", "resolve_mode"]


@dataclass(frozen=True)
class RoutedBatch:
    """A batch ready for the write tasks.

    Attributes:
        df: Table columns first, then one partition-value column per spec field (none
            with ``partition_values_in_task``).
        num_data_columns: How many leading columns are table columns.
        mode: The distribution that was applied.
        num_partitions: Partitions of the bucket shuffle (buckets plus the extra
            partitions of split values); ``None`` without a bucket shuffle.
        single_task: The batch was coalesced into one task instead of shuffled.
        layout: The bucket fields behind the partition ids (bucket mode).
        partition_values_in_task: ``df`` has no partition-value columns: the write tasks
            compute them (whenever pyarrow can; :mod:`icesink.write.keys`).
        in_driver: The batch is small enough to be written by the driver itself
            (:data:`icesink.route.one_task.DRIVER_MAX_BYTES`).
        sequential_buckets: The bucket shuffle is read in fewer tasks than it has
            partitions, each task reading whole partitions one after the other: a
            bucket's rows are all in once the next bucket's begin (bucket mode).
        source_partition_column: ``df`` ends with the Spark partition of the batch each
            row came from, taken before any shuffle; the write tasks report the ones they
            saw, for the next batch's routing, and do not write the column.
        collected: The rows, already in the driver, which writes them (``in_driver``): a
            one-table upsert batch split there (:mod:`icesink.batch.collected`); ``df`` is
            then only their description.
        bucket_check: The layout by which the files written must show one task per bucket
            (a bucket shuffle of values the tasks compute, no value split); checked by
            :meth:`~icesink.route.skew.RoutingHistory.record`.
    """

    df: DataFrame
    num_data_columns: int
    mode: DistributionMode
    num_partitions: int | None = None
    single_task: bool = False
    layout: BucketLayout | None = None
    partition_values_in_task: bool = False
    in_driver: bool = False
    sequential_buckets: bool = False
    source_partition_column: bool = False
    bucket_check: BucketLayout | None = None
    collected: pa.Table | None = None

    def task_options(self) -> dict[str, Any]:
        """What the write tasks need to know of the routing (fields of ``WriteSpec``)."""
        return {
            "num_data_columns": self.num_data_columns,
            "partition_values_in_task": self.partition_values_in_task,
            "sequential_buckets": self.layout if self.sequential_buckets else None,
            "source_partition_column": self.source_partition_column,
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
