"""Partition values computed inside the write task, with pyiceberg's Arrow transforms.

Without a shuffle (``distribution-mode=none``) nothing in Spark needs the partition
values, and computing them there costs the slowest part of the task: the JVM thread that
turns rows into Arrow for Python computes and converts two more columns per row. The
write task computes them instead, from the table columns it receives, with the Arrow
implementation of the Iceberg transforms that pyiceberg's own writes use.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform, VoidTransform
from pyiceberg.types import (
    BinaryType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from icesink.type_mapping import iceberg_to_arrow_schema

KeyFunction = Callable[[pa.RecordBatch], pa.Array]

# Source types whose buffers the native (Rust) transforms read as Spark hands them over.
# Decimals are not among them: Arrow IPC aligns buffers to 8 bytes, and the native code
# requires 16 for a 128-bit decimal (it aborts the worker otherwise).
_NATIVE_SOURCE_TYPES = (
    IntegerType,
    LongType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    StringType,
    BinaryType,
)


def arrow_key_functions(spec: PartitionSpec, schema: Schema) -> list[KeyFunction] | None:
    """One function per spec field giving its partition values for a batch of table columns.

    ``None`` when a field cannot be computed here: its source is not a top-level column,
    its transform reads a type outside :data:`_NATIVE_SOURCE_TYPES`, or pyarrow cannot
    apply it. The sink then computes the values in Spark, as with a shuffle.

    Args:
        spec: The partition spec.
        schema: The schema of the batches (the table's, as written to the files).
    """
    positions = {field.field_id: index for index, field in enumerate(schema.fields)}
    if any(
        not isinstance(field.transform, IdentityTransform | VoidTransform)
        and not isinstance(schema.find_field(field.source_id).field_type, _NATIVE_SOURCE_TYPES)
        for field in spec.fields
    ):
        return None
    arrow_schema = iceberg_to_arrow_schema(schema)
    functions: list[KeyFunction] = []
    for field in spec.fields:
        position = positions.get(field.source_id)
        if position is None:
            return None
        arrow_type = arrow_schema.field(position).type
        try:
            transform = field.transform.pyarrow_transform(schema.find_field(field.source_id).field_type)
            for probe in (pa.array([], arrow_type), pa.nulls(1, arrow_type)):
                transform(probe)
        except Exception:  # not implemented for this transform or type
            return None
        functions.append(_key_function(position, transform))
    return functions


def _key_function(position: int, transform: Callable[[pa.Array], pa.Array]) -> KeyFunction:
    return lambda batch: transform(batch.column(position))
