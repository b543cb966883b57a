"""Small building blocks for the writer unit tests (no Spark)."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.parquet import CompressionEstimator, ParquetFileWriter
from icesink.write.spec import WriteSpec

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "x", DoubleType(), required=False),
    NestedField(3, "s", StringType(), required=False),
)
ARROW_SCHEMA = iceberg_to_arrow_schema(SCHEMA)


def batch(start: int, n: int, seed: int = 0) -> pa.RecordBatch:
    """Rows that compress poorly (random doubles), so sizes are meaningful."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n, dtype=np.int64)
    x = rng.random(n)
    x[::97] = np.nan
    s = [None if i % 31 == 0 else f"row-{i}-{(i * 2654435761) % 10**9}" for i in ids.tolist()]
    return pa.RecordBatch.from_arrays(
        [pa.array(ids), pa.array(x), pa.array(s, pa.string())], schema=ARROW_SCHEMA
    )


class FileFactory:
    """Makes ParquetFileWriters into a temp folder, sharing one estimator."""

    def __init__(self, folder: Path, row_group_size_bytes: int = 256 * 1024) -> None:
        self.folder = folder
        self.io = PyArrowFileIO()
        self.estimator = CompressionEstimator()
        self.row_group_size_bytes = row_group_size_bytes
        self._seq = itertools.count()

    def __call__(self, partition: tuple[object, ...] = ()) -> ParquetFileWriter:
        return ParquetFileWriter(
            io=self.io,
            path=f"file://{self.folder}/f-{next(self._seq):05d}.parquet",
            schema=SCHEMA,
            arrow_schema=ARROW_SCHEMA,
            partition=partition,
            spec_id=0,
            row_group_size_bytes=self.row_group_size_bytes,
            estimator=self.estimator,
            compression="zstd",
            table_properties={},
        )


def task_spec(
    data_location: Path, table: str, schema: Schema, spec: PartitionSpec, file_prefix: str, **changes: object
) -> WriteSpec:
    """A write task's spec on the local disk: 64 MiB files and budget, zstd, partition values in the task."""
    task = WriteSpec(
        table=table,
        schema=schema,
        partition_spec=spec,
        data_location=f"file://{data_location}",
        io_properties={},
        table_properties={},
        file_prefix=file_prefix,
        target_file_size_bytes=64 << 20,
        row_group_size_bytes=8 << 20,
        memory_budget_bytes=64 << 20,
        compression="zstd",
        num_data_columns=len(schema.fields),
        partition_values_in_task=True,
    )
    return dataclasses.replace(task, **changes)  # type: ignore[arg-type]
