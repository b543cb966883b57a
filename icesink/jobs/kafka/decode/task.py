"""Executor side of decoding: the functions Spark runs through ``mapInArrow``.

Decoding a micro-batch takes two passes over it, and reads Kafka's values only once:

1. :func:`decode_function` reads the raw Kafka rows (``key``, ``value``, ``topic``,
   ``partition``, ``offset``, ``timestamp``), decodes each Arrow batch of values
   (:mod:`icesink.jobs.kafka.decode.chunk`), unwraps Debezium envelopes, and emits a few rows per
   batch: for each type of decoded rows, its schema and the rows themselves (with the
   Kafka metadata columns) as an Arrow IPC stream; for the values that could not be
   decoded, one more stream with their raw bytes and the reason. The driver caches
   these rows and merges the schemas into the batch's type.
2. :func:`conform_function` casts every decoded stream to that type and emits the rows;
   :func:`~icesink.jobs.kafka.decode.rejected_rows.dead_letter_function` turns the
   rejected values into dead-letter rows.

What the pass is given is :class:`~icesink.jobs.kafka.decode.spec.DecodeSpec`; the rows
between the passes are :mod:`icesink.jobs.kafka.decode.passes`. Only pyarrow (and
pyspark's type objects) is imported here: the workers need nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as st

from icesink import WriteError
from icesink.jobs.kafka.decode import debezium
from icesink.jobs.kafka.decode.chunk import (
    OUT_OF_RANGE,
    PARSE_ERROR,
    TYPE_MISMATCH,
    ChunkDecoder,
    DecodedChunk,
    Piece,
    Rejection,
)
from icesink.jobs.kafka.decode.framing import unframe
from icesink.jobs.kafka.decode.passes import (
    DATA,
    REJECTED,
    SKIPPED,
    WRITTEN,
    ipc_stream,
    pass_row,
    payloads,
)
from icesink.jobs.kafka.decode.protobuf_payloads import ProtobufReader, read_payloads
from icesink.jobs.kafka.decode.rejected_rows import rejected_table
from icesink.jobs.kafka.decode.spec import KAFKA_COLUMNS, KAFKA_INPUT_COLUMNS, TIMESTAMP_COLUMN, DecodeSpec
from icesink.jobs.kafka.decode.types import cast_array, cast_table, narrow_integers
from icesink.jobs.kafka.decode.written import TaskWrite
from icesink.sources import TIMESTAMP_MAX_MICROS, TIMESTAMP_MIN_MICROS

OUTPUT_BATCH_ROWS = 10_000


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
            yield pass_row(WRITTEN, file.record_count, None, pa.py_buffer(file.to_json().encode()))

    return decode


def conform_function(schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The second pass: the decoded streams in, rows of ``schema`` out."""
    serialized = schema.serialize().to_pybytes()

    def conform(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        target = pa.ipc.read_schema(pa.py_buffer(serialized))
        for batch in batches:
            for payload in payloads(batch):
                table = pa.ipc.open_stream(payload).read_all()
                yield from cast_table(table, target).to_batches(max_chunksize=OUTPUT_BATCH_ROWS)

    return conform


def _decode_batch(
    decoder: ChunkDecoder, spec: DecodeSpec, batch: pa.RecordBatch, writing: TaskWrite | None
) -> Iterator[pa.RecordBatch]:
    chunk, rejections = _decode_values(decoder, spec, batch.column("value"))
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
            yield pass_row(DATA, table.num_rows, schema, ipc_stream(table, spec.payload_compression))
    if rejections:
        rejected = rejected_table(batch, rejections)
        yield pass_row(REJECTED, len(rejections), None, ipc_stream(rejected, spec.payload_compression))
    if chunk.tombstones:
        yield pass_row(SKIPPED, len(chunk.tombstones), None, pa.py_buffer(b""))
    _check_accounted(batch.num_rows, chunk, by_schema, rejections)


def _decode_values(
    decoder: ChunkDecoder, spec: DecodeSpec, values: pa.Array
) -> tuple[DecodedChunk, list[Rejection]]:
    """The values decoded, and the rejected ones; a framed value's payload is what is decoded."""
    if spec.framing is None:
        chunk = decoder.decode(values)
        return chunk, list(chunk.rejections)
    payloads, reasons = unframe(values, spec.schema_ids, dict(spec.schema_errors))
    if spec.task_schemas:
        payloads = read_payloads(_protobuf_reader(spec), values, payloads, reasons)
    chunk = decoder.decode(payloads)
    rejections = []
    for rejection in chunk.rejections:
        reason = reasons.get(rejection.index)
        if reason is None and spec.framing == "avro" and rejection.reason == PARSE_ERROR:
            reason = "not Avro of its schema (Spark's from_avro could not read the bytes after the header)"
        rejections.append(rejection if reason is None else Rejection(rejection.index, PARSE_ERROR, reason))
    return chunk, rejections


_readers: dict[tuple[tuple[int, bytes], ...], ProtobufReader] = {}
_MAX_READERS = 8


def _protobuf_reader(spec: DecodeSpec) -> ProtobufReader:
    """One reader per worker process and schemas: its message classes are made once."""
    reader = _readers.get(spec.task_schemas)
    if reader is None:
        if len(_readers) >= _MAX_READERS:  # schemas of a past batch
            _readers.clear()
        reader = _readers[spec.task_schemas] = ProtobufReader(dict(spec.task_schemas))
    return reader


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
