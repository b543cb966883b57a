"""Executor side of decoding: the functions Spark runs through ``mapInArrow``.

Decoding a micro-batch takes two passes over it, and reads Kafka's values only once:

1. :func:`decode_function` reads the raw Kafka rows (``key``, ``value``, ``topic``,
   ``partition``, ``offset``, ``timestamp``), decodes each Arrow batch of values
   (:mod:`streaming_jobs.kafka.decode.chunk`), unwraps Debezium envelopes, and emits a few rows per
   batch: for each type of decoded rows, its schema and the rows themselves (with the
   Kafka metadata columns) as an Arrow IPC stream; for the values that could not be
   decoded, one more stream with their raw bytes and the reason. The driver caches
   these rows and merges the schemas into the batch's type.
2. :func:`conform_function` casts every decoded stream to that type and emits the rows;
   :func:`dead_letter_function` turns the rejected values into dead-letter rows.

Only pyarrow (and pyspark's type objects) is imported here: the workers need nothing else.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as st

from icesink import WriteError
from sink.schema.casts import TIMESTAMP_MAX_MICROS, TIMESTAMP_MIN_MICROS
from streaming_jobs.kafka.decode import debezium
from streaming_jobs.kafka.decode.chunk import (
    OUT_OF_RANGE,
    TYPE_MISMATCH,
    ChunkDecoder,
    DecodedChunk,
    Piece,
    Rejection,
)
from streaming_jobs.kafka.decode.types import cast_array, cast_table, narrow_integers
from streaming_jobs.kafka.decode.written import TaskWrite

KAFKA_INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
TOPIC_COLUMN = "_kafka_topic"
PARTITION_COLUMN = "_kafka_partition"
OFFSET_COLUMN = "_kafka_offset"
TIMESTAMP_COLUMN = "_kafka_timestamp"
KAFKA_COLUMNS = pa.schema(
    [
        pa.field(TOPIC_COLUMN, pa.string()),
        pa.field(PARTITION_COLUMN, pa.int32()),
        pa.field(OFFSET_COLUMN, pa.int64()),
        pa.field(TIMESTAMP_COLUMN, pa.timestamp("us", tz="UTC")),
    ]
)
DEAD_LETTER_COLUMN = "_kafka_value"  # the dead letter's ``column``: the whole value failed
DEAD_LETTER_VALUE_MAX_CHARS = 1024  # of the value shown as text; original_row keeps all its bytes

DATA, REJECTED, WRITTEN = "data", "rejected", "written"  # WRITTEN: a file's message (written.py)
SKIPPED = "skipped"  # Debezium tombstones, only counted (num_rows)
PASS_DDL = "kind string, num_rows bigint, schema binary, payload binary"
PASS_COLUMNS = ("kind", "num_rows", "schema", "payload")
SPEC_OPTION = "decode.spec"  # the option of a source that decodes as it reads: DecodeSpec.to_json()
DEAD_LETTER_DDL = "column string, reason string, value string, original_row string"
OUTPUT_BATCH_ROWS = 10_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
PAYLOAD_COMPRESSION: str | None = "lz4"  # cheapest to write and read back; zstd saves memory, not time

_REJECTED_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("reason", pa.string()),
        ("message", pa.string()),
    ]
)


@dataclass(frozen=True)
class DecodeSpec:
    """What the decoding pass needs (picklable, shipped to the executors).

    Attributes:
        debezium: Unwrap Debezium change events.
        fixed_schema: Keep only these fields (nested ones too); ``None`` keeps every field.
        metadata_columns: Add the ``_kafka_*`` columns to every row.
        payload_compression: Codec of the decoded streams Spark caches between the passes.
    """

    debezium: bool = False
    fixed_schema: st.StructType | None = None
    metadata_columns: bool = True
    payload_compression: str | None = PAYLOAD_COMPRESSION

    def to_json(self) -> str:
        """The spec as a JSON string: how a data source option carries it to the executors."""
        fixed = None if self.fixed_schema is None else self.fixed_schema.jsonValue()
        return json.dumps(
            {
                "debezium": self.debezium,
                "fixed_schema": fixed,
                "metadata_columns": self.metadata_columns,
                "payload_compression": self.payload_compression,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> DecodeSpec:
        """The spec of :meth:`to_json`."""
        value = json.loads(text)
        fixed = value["fixed_schema"]
        return cls(
            debezium=bool(value["debezium"]),
            fixed_schema=None if fixed is None else st.StructType.fromJson(fixed),
            metadata_columns=bool(value["metadata_columns"]),
            payload_compression=value["payload_compression"],
        )

    @property
    def reserved_names(self) -> frozenset[str]:
        """Column names the decoder adds itself: a value may not have such a field."""
        names = set(KAFKA_COLUMNS.names) if self.metadata_columns else set()
        if self.debezium:
            names.update(debezium.COLUMNS)
        return frozenset(names)


def decode_function(spec: DecodeSpec) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The first pass: raw Kafka rows in, ``kind, num_rows, schema, payload`` rows out (:data:`PASS_DDL`)."""

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        decoder = ChunkDecoder(skip_tombstones=spec.debezium)
        writing = TaskWrite.in_task()  # the sink planned a write by this job's tasks
        try:
            for batch in batches:
                yield from _decode_batch(decoder, spec, batch, writing)
            files = writing.close() if writing is not None else []
        except Exception as e:
            if writing is not None:
                writing.abort(e)
            raise
        for file in files:
            yield _pass_row(WRITTEN, file.record_count, None, pa.py_buffer(file.to_json().encode()))

    return decode


def conform_function(schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The second pass: the decoded streams in, rows of ``schema`` out."""
    serialized = schema.serialize().to_pybytes()

    def conform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        target = pa.ipc.read_schema(pa.py_buffer(serialized))
        for batch in batches:
            for payload in _payloads(batch):
                table = pa.ipc.open_stream(payload).read_all()
                yield from cast_table(table, target).to_batches(max_chunksize=OUTPUT_BATCH_ROWS)

    return conform


def dead_letter_function() -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The rejected values in, dead-letter rows out (:data:`DEAD_LETTER_DDL`).

    ``original_row`` is a JSON object with the Kafka metadata under the names of the
    table's metadata columns, the raw key and value in base64 (``_kafka_key``,
    ``_kafka_value``) and the ``error``.
    """

    def dead_letters(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for payload in _payloads(batch):
                table = pa.ipc.open_stream(payload).read_all()
                yield _dead_letter_rows(table)

    return dead_letters


def _decode_batch(
    decoder: ChunkDecoder, spec: DecodeSpec, batch: pa.RecordBatch, writing: TaskWrite | None
) -> Iterator[pa.RecordBatch]:
    chunk = decoder.decode(batch.column("value"))
    rejections = list(chunk.rejections)
    outside = _timestamps_outside_range(batch) if spec.metadata_columns else None
    by_schema: dict[pa.Schema, list[pa.Table]] = {}
    for piece in chunk.pieces:
        table, indices = _shape(piece, spec, rejections)
        if outside is not None:
            table, indices = _reject_outside(table, indices, *outside, rejections)
        if table.num_rows:
            schema = table.schema
            if spec.metadata_columns:
                table = _with_metadata(table, batch, indices)
            by_schema.setdefault(schema, []).append(table)
    index = writing.table_of(batch) if writing is not None and by_schema else None
    for schema, tables in by_schema.items():
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if writing is None or index is None or not writing.write(index, table):
            yield _pass_row(DATA, table.num_rows, schema, _ipc(table, spec.payload_compression))
    if rejections:
        rejected = _rejected_table(batch, rejections)
        yield _pass_row(REJECTED, len(rejections), None, _ipc(rejected, spec.payload_compression))
    if chunk.tombstones:
        yield _pass_row(SKIPPED, len(chunk.tombstones), None, pa.py_buffer(b""))
    _check_accounted(batch.num_rows, chunk, by_schema, rejections)


def _timestamps_outside_range(batch: pa.RecordBatch) -> tuple[np.ndarray, pa.Array] | None:
    """Per record, whether its Kafka timestamp is outside the range the sink writes, and the
    timestamps as microseconds since the epoch; ``None`` when every one is inside."""
    micros = batch.column("timestamp").cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
    low, high = pc.less(micros, TIMESTAMP_MIN_MICROS), pc.greater(micros, TIMESTAMP_MAX_MICROS)
    flags = pc.fill_null(pc.or_(low, high), False).to_numpy(zero_copy_only=False)
    return (flags, micros) if flags.any() else None


def _reject_outside(
    table: pa.Table,
    indices: np.ndarray,
    outside: np.ndarray,
    micros: pa.Array,
    rejections: list[Rejection],
) -> tuple[pa.Table, np.ndarray]:
    """Reject the rows whose Kafka timestamp no table column can hold (the sink would too)."""
    bad = outside[indices]
    if not bad.any():
        return table, indices
    for index in indices[bad]:
        rejections.append(
            Rejection(
                int(index),
                OUT_OF_RANGE,
                f"Kafka timestamp {micros[int(index)].as_py()} (microseconds since the epoch) is outside "
                f"0001-01-01..9999-12-31, the range of {TIMESTAMP_COLUMN}; fix the producer's timestamps, "
                "or turn the metadata columns off",
            )
        )
    keep = np.flatnonzero(~bad)
    return table.take(pa.array(keep)), indices[keep]


def _shape(piece: Piece, spec: DecodeSpec, rejections: list[Rejection]) -> tuple[pa.Table, np.ndarray]:
    """Unwrap, drop reserved fields, project and narrow one piece; rejected rows go to ``rejections``."""
    table, indices = piece.table, piece.indices
    if spec.debezium:
        unwrapped = debezium.unwrap(table)
        rejections.extend(
            Rejection(int(indices[i]), TYPE_MISMATCH, unwrapped.message) for i in unwrapped.rejected
        )
        table, indices = unwrapped.table, indices[unwrapped.kept]
    table, indices = _drop_reserved(table, indices, spec, rejections)
    if spec.fixed_schema is not None:
        table = _project(table, spec.fixed_schema, spec)
    return narrow_integers(table), indices


def _drop_reserved(
    table: pa.Table, indices: np.ndarray, spec: DecodeSpec, rejections: list[Rejection]
) -> tuple[pa.Table, np.ndarray]:
    """Reject rows with a value in a field named like a column the decoder adds; drop the field."""
    produced = set(debezium.COLUMNS) if spec.debezium else set()
    reserved = [n for n in table.column_names if n == "" or (n in spec.reserved_names and n not in produced)]
    for name in reserved:
        column = table.column(name)
        used = column.is_valid().to_numpy(zero_copy_only=False)
        if used.any():
            message = f"the value has a field {name!r}, a name reserved for a column icesink adds"
            rejections.extend(
                Rejection(int(indices[i]), TYPE_MISMATCH, message) for i in np.flatnonzero(used)
            )
            keep = np.flatnonzero(~used)
            table, indices = table.take(pa.array(keep)), indices[keep]
        table = table.drop_columns([name])
    return table, indices


def _project(table: pa.Table, fixed: st.StructType, spec: DecodeSpec) -> pa.Table:
    """Keep only the fields of ``fixed`` (and the Debezium columns)."""
    keep = set(debezium.COLUMNS) if spec.debezium else set()
    wanted = {f.name: f.dataType for f in fixed.fields}
    projected = table.select([n for n in table.column_names if n in keep or n in wanted])
    for index, name in enumerate(projected.column_names):
        if name in keep:
            continue
        array = projected.column(index).combine_chunks()
        data_type = _projected_type(array.type, wanted[name])
        array = cast_array(array, data_type) if data_type is not None else pa.nulls(len(array))
        projected = projected.set_column(index, pa.field(name, array.type), array)
    return projected


def _projected_type(inferred: pa.DataType, fixed: st.DataType) -> pa.DataType | None:
    if isinstance(fixed, st.StructType) and pa.types.is_struct(inferred):
        wanted = {f.name: f.dataType for f in fixed.fields}
        fields = []
        for field in inferred:
            if field.name in wanted:
                child = _projected_type(field.type, wanted[field.name])
                if child is not None:
                    fields.append(field.with_type(child))
        return pa.struct(fields) if fields else None
    if isinstance(fixed, st.ArrayType) and pa.types.is_list(inferred):
        element = _projected_type(inferred.value_type, fixed.elementType)
        return pa.list_(element) if element is not None else None
    return inferred


def _with_metadata(table: pa.Table, batch: pa.RecordBatch, indices: np.ndarray) -> pa.Table:
    take = pa.array(indices)
    for field in KAFKA_COLUMNS:
        source = batch.column(KAFKA_INPUT_COLUMNS[2 + KAFKA_COLUMNS.get_field_index(field.name)])
        table = table.append_column(field, source.take(take).cast(field.type))
    return table


def _rejected_table(batch: pa.RecordBatch, rejections: list[Rejection]) -> pa.Table:
    take = pa.array([r.index for r in rejections], pa.int64())
    columns = [batch.column(name).take(take) for name in KAFKA_INPUT_COLUMNS]
    columns.append(pa.array([r.reason for r in rejections], pa.string()))
    columns.append(pa.array([r.message for r in rejections], pa.string()))
    arrays = [c.cast(f.type) for c, f in zip(columns, _REJECTED_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=_REJECTED_SCHEMA)


def _dead_letter_rows(table: pa.Table) -> pa.RecordBatch:
    values, reasons, originals = [], [], []
    # as numbers: a timestamp outside Python's datetime range is why some of these were rejected
    timestamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    for row, micros in zip(table.drop_columns(["timestamp"]).to_pylist(), timestamps, strict=True):
        raw: bytes | None = row["value"]
        values.append(None if raw is None else raw.decode("utf-8", "replace")[:DEAD_LETTER_VALUE_MAX_CHARS])
        reasons.append(row["reason"])
        original = {
            TOPIC_COLUMN: row["topic"],
            PARTITION_COLUMN: row["partition"],
            OFFSET_COLUMN: row["offset"],
            TIMESTAMP_COLUMN: _timestamp_text(micros),
            "_kafka_key": _base64(row["key"]),
            "_kafka_value": _base64(raw),
            "error": row["message"],
        }
        originals.append(json.dumps(original))
    return pa.RecordBatch.from_arrays(
        [
            pa.array([DEAD_LETTER_COLUMN] * table.num_rows, pa.string()),
            pa.array(reasons, pa.string()),
            pa.array(values, pa.string()),
            pa.array(originals, pa.string()),
        ],
        names=["column", "reason", "value", "original_row"],
    )


def _pass_row(kind: str, num_rows: int, schema: pa.Schema | None, payload: pa.Buffer) -> pa.RecordBatch:
    schema_bytes = None if schema is None else schema.serialize().to_pybytes()
    return pa.RecordBatch.from_arrays(
        [
            pa.array([kind], pa.string()),
            pa.array([num_rows], pa.int64()),
            pa.array([schema_bytes], pa.binary()),
            _one_binary(payload),
        ],
        names=["kind", "num_rows", "schema", "payload"],
    )


def _ipc(table: pa.Table, compression: str | None) -> pa.Buffer:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(
        sink, table.schema, options=pa.ipc.IpcWriteOptions(compression=compression)
    ) as writer:
        writer.write_table(table)
    return sink.getvalue()


def _one_binary(buffer: pa.Buffer) -> pa.Array:
    """A one-value binary array over ``buffer``, without copying it."""
    offsets = pa.py_buffer(np.array([0, buffer.size], dtype=np.int32).tobytes())
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, buffer])


def _payloads(batch: pa.RecordBatch) -> Iterator[pa.Buffer]:
    column = batch.column(batch.schema.get_field_index("payload"))
    for index in range(len(column)):
        scalar = column[index]
        if scalar.is_valid:
            yield scalar.as_buffer()


def _timestamp_text(micros: int | None) -> str | None:
    """ISO 8601 (UTC) within the writable range; the microseconds since the epoch outside it."""
    if micros is None:
        return None
    if TIMESTAMP_MIN_MICROS <= micros <= TIMESTAMP_MAX_MICROS:
        return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat()
    return str(micros)


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _check_accounted(
    rows: int, chunk: DecodedChunk, by_schema: dict[pa.Schema, list[pa.Table]], rejections: list[Rejection]
) -> None:
    decoded = sum(t.num_rows for tables in by_schema.values() for t in tables) + len(chunk.tombstones)
    if decoded + len(rejections) != rows:  # a bug, never bad input: fail the batch, lose nothing
        raise WriteError(
            f"decoding accounted for {decoded} rows and {len(rejections)} rejections of {rows} values "
            f"({len(chunk.pieces)} pieces)",
            hint="this is a bug in icesink's decoder; please report it with the batch's values",
        )
