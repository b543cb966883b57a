"""Unwrap Debezium change events: the changed row becomes the row, the operation a column.

A Debezium JSON value is an envelope ``{"before": {...}, "after": {...}, "op": "u",
"source": {"ts_ms": ...}, ...}``, or, with the JSON converter's schemas enabled, that
envelope under ``"payload"`` next to a ``"schema"``. Unwrapping keeps:

- the row: ``after``, or ``before`` for a delete (op ``d``), so a delete keeps its key;
  a truncate (op ``t``) has neither and keeps only its operation;
- :data:`OP_COLUMN`: the operation (``c`` create, ``u`` update, ``d`` delete, ``r``
  snapshot read, ``t`` truncate); with the sink's ``write.mode=upsert`` it drives the
  table (``c``, ``r``, ``u`` insert or replace the key's row, ``d`` deletes it), in
  append mode every event stays a row;
- :data:`SOURCE_TS_COLUMN`: ``source.ts_ms``, when the change happened in the source
  database, as a UTC timestamp.

A value without ``op`` is not a change event and is rejected.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.jobs.kafka.decode.types import cast_array, merge_types

OP_COLUMN = "_op"
SOURCE_TS_COLUMN = "_source_ts"
COLUMNS = (OP_COLUMN, SOURCE_TS_COLUMN)
_DELETE = "d"


@dataclass(frozen=True)
class Unwrapped:
    """A piece of change events, unwrapped.

    Attributes:
        table: The rows: the row's columns, then :data:`OP_COLUMN` and :data:`SOURCE_TS_COLUMN`.
        kept: Positions (in the piece) of the events in ``table``, in order.
        rejected: Positions of the values that are not change events.
        message: Why those were rejected.
    """

    table: pa.Table
    kept: np.ndarray
    rejected: np.ndarray
    message: str


def unwrap(table: pa.Table) -> Unwrapped:
    """Unwrap a piece of Debezium envelopes (see the module docstring)."""
    envelope = _envelope(table)
    op = envelope.get("op")
    if op is None or not (pa.types.is_string(op.type) or pa.types.is_large_string(op.type)):
        everything = np.arange(table.num_rows)
        return Unwrapped(
            _empty_rows(), np.arange(0), everything, "not a Debezium change event: no 'op' field"
        )
    valid = op.is_valid().to_numpy(zero_copy_only=False)
    kept, rejected = np.flatnonzero(valid), np.flatnonzero(~valid)
    if len(rejected):
        envelope = {name: column.take(pa.array(kept)) for name, column in envelope.items()}
        op = envelope["op"]
    rows = len(kept)
    before, after = _row_image(envelope.get("before")), _row_image(envelope.get("after"))
    row_type = merge_types(
        before.type if before is not None else pa.null(), after.type if after is not None else pa.null()
    )
    if not pa.types.is_struct(row_type):  # neither image was ever there (truncates only)
        row_type = pa.struct([])
    before_row = cast_array(before, row_type) if before is not None else pa.nulls(rows, row_type)
    after_row = cast_array(after, row_type) if after is not None else pa.nulls(rows, row_type)
    row = pc.if_else(pc.equal(op, _DELETE), before_row, after_row)
    columns = dict(zip([f.name for f in row_type], row.flatten(), strict=True))
    columns[OP_COLUMN] = op.cast(pa.string())
    columns[SOURCE_TS_COLUMN] = _source_ts(envelope.get("source"), rows)
    return Unwrapped(pa.table(columns), kept, rejected, "not a Debezium change event: 'op' is null")


def _envelope(table: pa.Table) -> dict[str, pa.Array]:
    columns = {name: _array(table.column(name)) for name in table.column_names}
    payload = columns.get("payload")
    if "op" not in columns and payload is not None and pa.types.is_struct(payload.type):
        return dict(zip([f.name for f in payload.type], payload.flatten(), strict=True))
    return columns


def _row_image(column: pa.Array | None) -> pa.Array | None:
    """``before``/``after`` when it holds rows (always null is fine too), else None."""
    if column is None or not (pa.types.is_struct(column.type) or pa.types.is_null(column.type)):
        return None
    return column


def _source_ts(source: pa.Array | None, rows: int) -> pa.Array:
    utc = pa.timestamp("us", tz="UTC")
    if source is None or not pa.types.is_struct(source.type) or source.type.get_field_index("ts_ms") < 0:
        return pa.nulls(rows, utc)
    ts_ms = source.flatten()[source.type.get_field_index("ts_ms")]
    if not pa.types.is_integer(ts_ms.type):
        return pa.nulls(rows, utc)
    return pc.multiply(ts_ms.cast(pa.int64()), 1000).cast(pa.timestamp("us")).cast(utc)


def _empty_rows() -> pa.Table:
    return pa.table(
        {OP_COLUMN: pa.array([], pa.string()), SOURCE_TS_COLUMN: pa.array([], pa.timestamp("us", tz="UTC"))}
    )


def _array(column: pa.ChunkedArray) -> pa.Array:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
