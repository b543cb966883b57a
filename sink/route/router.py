"""Step 3: add the partition-value columns and shuffle rows to their write tasks."""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sink.config import DistributionMode
from sink.route.transforms import partition_value_column

PARTITION_COLUMN_PREFIX = "__icesink_partition_"


@dataclass(frozen=True)
class RoutedBatch:
    """A batch ready for the write tasks.

    Attributes:
        df: Table columns first, then one partition-value column per spec field.
        num_data_columns: How many leading columns are table columns.
        mode: The distribution that was applied.
    """

    df: DataFrame
    num_data_columns: int
    mode: DistributionMode


def resolve_mode(requested: DistributionMode | None, spec: PartitionSpec) -> DistributionMode:
    """The distribution to use: the requested one, else bucket when the spec has a bucket, else hash."""
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
    """

    def __init__(self, spec: PartitionSpec, schema: Schema, mode: DistributionMode | None) -> None:
        self._spec = spec
        self._schema = schema
        self.mode = resolve_mode(mode, spec)

    def route(self, df: DataFrame) -> RoutedBatch:
        """Add the partition columns to ``df`` (already aligned to the table) and shuffle."""
        partition_columns = []
        for index, field in enumerate(self._spec.fields):
            source_name = self._schema.find_column_name(field.source_id)
            source_type = self._schema.find_field(field.source_id).field_type
            assert source_name is not None
            column = partition_value_column(field.transform, F.col(_quoted_path(source_name)), source_type)
            partition_columns.append(column.alias(f"{PARTITION_COLUMN_PREFIX}{index}"))
        routed = df.select("*", *partition_columns) if partition_columns else df
        names = [f"{PARTITION_COLUMN_PREFIX}{i}" for i in range(len(partition_columns))]
        if self.mode is DistributionMode.HASH and names:
            routed = routed.repartition(*[F.col(n) for n in names])
        return RoutedBatch(routed, len(df.columns), self.mode)


def _quoted_path(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))
