"""What a write task is given: :class:`WriteSpec`, small and picklable, shipped from the driver.

Its own module, below the task (:mod:`icesink.write.task`) and the table's files
(:mod:`icesink.write.table_files`) that both read it, and the driver steps that build it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema

from icesink.write.layout import BucketLayout


@dataclass(frozen=True)
class WriteSpec:
    """Everything a write task needs, shipped from the driver with the task.

    Attributes:
        table: Table identifier, for messages.
        schema: Iceberg schema of the files (the table's current schema).
        partition_spec: The table's default partition spec.
        data_location: Folder under which data files go (``<table>/data`` by default).
        io_properties: Catalog/FileIO properties to build the file system on the executor.
        table_properties: Table properties (metrics modes).
        file_prefix: Start of every file name, unique per batch attempt.
        target_file_size_bytes: On-disk size at which files roll.
        row_group_size_bytes: Estimated on-disk size of a row group.
        memory_budget_bytes: Most memory the rows buffered by a task's open writers may hold.
        compression: Parquet codec.
        num_data_columns: Leading input columns that are table columns (and the bad-row
            flag); the rest are partition values, one per spec field, in spec order.
        bad_row_flag: The table columns are followed by a boolean column, true for a
            row to leave out (it belongs in the dead-letter table); such rows are
            dropped and counted (:class:`~icesink.write.messages.TaskReport`).
        partition_values_in_task: The input has no partition-value columns; the task
            computes them from the table columns (:mod:`icesink.write.keys`).
        sequential_buckets: The input is whole partitions of a bucket shuffle, one after
            the other, with this layout: the files of a bucket are finished (encoded and
            closed in the background) as soon as a later bucket's rows begin.
        source_partition_column: The input's last column is the Spark partition of the
            batch each row came from (before any shuffle); the task reports which it saw
            (:attr:`~icesink.write.messages.TaskReport.source_partitions`) and writes the rest.
        key_columns: The table's key columns (upsert mode): each data file's message carries
            its rows' keys (:attr:`~icesink.write.messages.DataFileMessage.keys`); empty in
            append mode.
    """

    table: str
    schema: Schema
    partition_spec: PartitionSpec
    data_location: str
    io_properties: dict[str, str] = dataclasses.field(repr=False)  # credentials: never shown
    table_properties: dict[str, str]
    file_prefix: str
    target_file_size_bytes: int
    row_group_size_bytes: int
    memory_budget_bytes: int
    compression: str
    num_data_columns: int
    partition_values_in_task: bool = False
    sequential_buckets: BucketLayout | None = None
    bad_row_flag: bool = False
    source_partition_column: bool = False
    key_columns: tuple[str, ...] = ()
