"""Batches made in Python: when the write tasks can make the rows themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyspark.sql import DataFrame

from icesink.config import DistributionMode
from icesink.normalize import NormalizedBatch
from icesink.route.routed import RoutedBatch
from icesink.type_mapping import iceberg_to_spark_schema
from icesink.write.task import ArrowFunction

if TYPE_CHECKING:
    from icesink.batch.source_write import SourceWrite


@dataclass(frozen=True)
class ArrowSource:
    """How a batch was made in Python: ``df.mapInArrow(function, <the batch's schema>)``.

    Handing the rows from that function to the JVM and back to the write task costs two
    conversions of every row. When the batch needs nothing from Spark on the way (its
    schema is the table's, no row can be bad but in ``in_range_columns``, no partition-value
    column or shuffle is added: :func:`fusable`), the write tasks run ``function`` on
    ``df``'s rows themselves.

    Attributes:
        df: The DataFrame ``function`` maps.
        function: The ``mapInArrow`` function that made the batch.
        rows: The batch's rows, as its maker counted them: the write must account for each.
        in_range_columns: Date and timestamp columns whose values the maker keeps within
            the range the sink writes (0001-01-01 to 9999-12-31), so Spark need not check them.
        written: The rows the source's own tasks wrote (:meth:`IcebergSink.source_write
            <icesink.sink.IcebergSink.source_write>`); the batch is the rest of the rows.
    """

    df: DataFrame
    function: ArrowFunction
    rows: int
    in_range_columns: frozenset[str] = frozenset()
    written: SourceWrite | None = None


def fusable(
    batch_df: DataFrame, table: Table, normalized: NormalizedBatch, routed: RoutedBatch, source: ArrowSource
) -> bool:
    """Whether the batch can be made inside the write tasks (see :class:`ArrowSource`)."""
    # A ``none`` batch coalesced into one task, no column added, moved no row: the source's
    # tasks can still make it (each writing its own files, as without the coalesce).
    none = routed.mode is DistributionMode.NONE and routed.partition_values_in_task
    coalesced = none and routed.single_task
    if routed.in_driver or (routed.df is not normalized.rows and not coalesced):
        return False  # the rows must go through Spark: shuffled or collected
    checks = normalized.range_checks
    if checks is None or not checks <= source.in_range_columns:
        return False  # Spark must find the bad rows
    table_fields = iceberg_to_spark_schema(table.schema()).fields
    batch_fields = batch_df.schema.fields
    return len(batch_fields) == len(table_fields) and all(
        b.name == t.name and b.dataType == t.dataType for b, t in zip(batch_fields, table_fields, strict=True)
    )
