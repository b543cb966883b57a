"""One table's side of a write task: its file schema, its partition values and its rolling writers.

A write task of a single table has one of these (:class:`~icesink.write.task.DataTaskWriter`);
a routed task, one per destination table, all feeding one fanout
(:mod:`icesink.write.routed_task`). Built from the table's
:class:`~icesink.write.spec.WriteSpec` inside the task; opens the file system, and builds the
file schema and statistics plan, when the first rows need them: a task without rows
(Spark hands one to a write job for every empty input split) then never loads the
modules behind them (pyiceberg's Arrow file IO, and pandas with it).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.typedef import Record

from icesink._pyiceberg import StatisticsPlan, partition_representation, statistics_plan
from icesink.errors import WriteError
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.dictionary import DictionaryColumns
from icesink.write.keys import KeyFunction, arrow_key_functions
from icesink.write.manifest_entry import EntryEncoding, manifest_codec, sync_marker
from icesink.write.messages import DataFileMessage
from icesink.write.parquet import CompressionEstimator, ParquetFileWriter
from icesink.write.rolling import RollingFileWriter

if TYPE_CHECKING:
    from icesink.write.spec import WriteSpec


class TableFiles:
    """Makes the data files of one table in one task.

    Args:
        spec: The table's write spec.
        task_id: Spark partition id of the task (part of every file name).
        attempt: The task's attempt number (likewise).
    """

    def __init__(self, spec: WriteSpec, task_id: int, attempt: int) -> None:
        self.spec = spec
        self._task_id = task_id
        self._attempt = attempt
        self._estimator = CompressionEstimator()
        self._file_seq = itertools.count(1)
        self._source_types = [
            spec.schema.find_field(f.source_id).field_type for f in spec.partition_spec.fields
        ]
        self._row_group_bytes = min(
            spec.row_group_size_bytes, max(spec.target_file_size_bytes // 4, 64 * 1024)
        )

    @functools.cached_property
    def io(self) -> FileIO:
        """The table's file system, built on first use."""
        return load_file_io(self.spec.io_properties, self.spec.data_location)

    @functools.cached_property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the data files (field ids, 32-bit offsets)."""
        return iceberg_to_arrow_schema(self.spec.schema)

    @functools.cached_property
    def dictionary(self) -> DictionaryColumns:
        """Which columns the files dictionary-encode, decided from the first rows (:meth:`to_file_batch`)."""
        return DictionaryColumns(self.arrow_schema)

    @functools.cached_property
    def _stats_plan(self) -> StatisticsPlan:
        return statistics_plan(self.spec.schema, self.spec.table_properties)

    @functools.cached_property
    def key_functions(self) -> list[KeyFunction] | None:
        """The functions computing partition values here, or ``None`` when the input carries them."""
        spec = self.spec
        if not spec.partition_values_in_task:
            return None
        functions = arrow_key_functions(spec.partition_spec, spec.schema)
        if functions is None:  # the driver checked the same spec and schema
            raise WriteError(
                f"partition values of spec {spec.partition_spec} cannot be computed in the write task",
                table=spec.table,
                hint="this is a bug in icesink's routing; please report it with the table's spec",
            )
        return functions

    @functools.cached_property
    def _key_indexes(self) -> tuple[int, ...]:
        """Where the table's key columns are in the file schema (none in append mode, nor for keys
        that are not top-level columns: the driver then reads them itself)."""
        names = self.arrow_schema.names
        if not all(name in names for name in self.spec.key_columns):
            return ()
        return tuple(names.index(name) for name in self.spec.key_columns)

    @functools.cached_property
    def _entry_encoding(self) -> EntryEncoding:
        spec = self.spec
        codec = manifest_codec(spec.table_properties)
        return EntryEncoding(spec.partition_spec, spec.schema, codec, sync_marker(spec.file_prefix))

    def finished(self, message: DataFileMessage) -> DataFileMessage:
        """``message`` naming the table, with its file's manifest entry encoded
        (:mod:`icesink.write.manifest_entry`)."""
        return dataclasses.replace(self._entry_encoding.with_entry(message), table=self.spec.table)

    def to_file_batch(self, columns: list[pa.Array]) -> pa.RecordBatch:
        """The table's columns (in its order) as a batch of the file schema (field ids, UTC, ...).

        The first batches are also the sample that decides the files' dictionary columns.
        """
        arrays = []
        for column, field in zip(columns, self.arrow_schema, strict=True):
            arrays.append(column if column.type.equals(field.type) else column.cast(field.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)
        self.dictionary.sample(batch)
        return batch

    def partition_record(self, key: tuple[Any, ...]) -> tuple[Any, ...]:
        """Raw partition values as Iceberg's internal representation."""
        return tuple(
            partition_representation(source_type, value) if value is not None else None
            for source_type, value in zip(self._source_types, key, strict=True)
        )

    def new_rolling_writer(self, partition: tuple[object, ...]) -> RollingFileWriter:
        """A rolling writer of the files of ``partition`` (Iceberg representation)."""
        spec = self.spec
        folder = spec.data_location.rstrip("/")
        if spec.partition_spec.fields:
            folder += "/" + spec.partition_spec.partition_to_path(Record(*partition), spec.schema)

        def new_file() -> ParquetFileWriter:
            name = (
                f"{spec.file_prefix}-{self._task_id:05d}-{self._attempt}-{next(self._file_seq):05d}.parquet"
            )
            return ParquetFileWriter(
                io=self.io,
                path=f"{folder}/{name}",
                schema=spec.schema,
                arrow_schema=self.arrow_schema,
                partition=tuple(partition),
                spec_id=spec.partition_spec.spec_id,
                row_group_size_bytes=self._row_group_bytes,
                estimator=self._estimator,
                compression=spec.compression,
                table_properties=spec.table_properties,
                stats_plan=self._stats_plan,
                dictionary=self.dictionary,
                key_columns=self._key_indexes,
            )

        return RollingFileWriter(new_file, spec.target_file_size_bytes, self._estimator, self.finished)
