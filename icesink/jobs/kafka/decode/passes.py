"""The rows the first decoding pass hands the second: ``kind, num_rows, schema, payload``.

Each row holds one Arrow IPC stream (``payload``): decoded rows of one schema
(:data:`DATA`), values that could not be decoded (:data:`REJECTED`), a data file the task
wrote itself (:data:`WRITTEN`), or only a count (:data:`SKIPPED`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

DATA, REJECTED, WRITTEN = "data", "rejected", "written"  # WRITTEN: a file's message (written.py)
SKIPPED = "skipped"  # Debezium tombstones, only counted (num_rows)
PASS_DDL = "kind string, num_rows bigint, schema binary, payload binary"
PASS_COLUMNS = ("kind", "num_rows", "schema", "payload")


def pass_row(kind: str, num_rows: int, schema: pa.Schema | None, payload: pa.Buffer) -> pa.RecordBatch:
    """One row of :data:`PASS_DDL`."""
    schema_bytes = None if schema is None else schema.serialize().to_pybytes()
    return pa.RecordBatch.from_arrays(
        [
            pa.array([kind], pa.string()),
            pa.array([num_rows], pa.int64()),
            pa.array([schema_bytes], pa.binary()),
            one_binary(payload),
        ],
        names=["kind", "num_rows", "schema", "payload"],
    )


def ipc_stream(table: pa.Table, compression: str | None) -> pa.Buffer:
    """``table`` as one Arrow IPC stream, the payload of a row."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(
        sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)
    ) as writer:
        writer.write_table(table)
    return sink.getvalue()


def one_binary(buffer: pa.Buffer) -> pa.Array:
    """A one-value binary array over ``buffer``, without copying it."""
    offsets = pa.py_buffer(np.array([0, buffer.size], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, buffer])


def payloads(batch: pa.RecordBatch) -> Iterator[pa.Buffer]:
    """The payloads of a batch of :data:`PASS_DDL` rows."""
    column = batch.column(batch.schema.get_field_index("payload"))
    for index in range(len(column)):
        scalar = column[index]
        if scalar.is_valid:
            yield scalar.as_buffer()
