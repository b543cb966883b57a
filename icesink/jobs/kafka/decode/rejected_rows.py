"""Executor side of the values that could not be decoded: rejected rows, then dead-letter rows.

The first pass keeps each rejected value's Kafka record and reason (:func:`rejected_table`);
:func:`dead_letter_function` turns them into the dead-letter table's rows
(:data:`DEAD_LETTER_DDL`), which the driver hands to the sink's dead-letter queue.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator

import pyarrow as pa

from icesink.jobs.kafka.decode.chunk import Rejection
from icesink.jobs.kafka.decode.passes import payloads
from icesink.jobs.kafka.decode.spec import (
    KAFKA_INPUT_COLUMNS,
    OFFSET_COLUMN,
    PARTITION_COLUMN,
    TIMESTAMP_COLUMN,
    TOPIC_COLUMN,
)
from icesink.sources import TIMESTAMP_MAX_MICROS, TIMESTAMP_MIN_MICROS

DEAD_LETTER_COLUMN = "_kafka_value"  # the dead letter's ``column``: the whole value failed
DEAD_LETTER_VALUE_MAX_CHARS = 1024  # of the value shown as text; original_row keeps all its bytes
DEAD_LETTER_DDL = "column string, reason string, value string, original_row string"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

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


def dead_letter_function() -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The rejected values in, dead-letter rows out (:data:`DEAD_LETTER_DDL`).

    ``original_row`` is a JSON object with the Kafka metadata under the names of the
    table's metadata columns, the raw key and value in base64 (``_kafka_key``,
    ``_kafka_value``) and the ``error``.
    """

    def dead_letters(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for payload in payloads(batch):
                table = pa.ipc.open_stream(payload).read_all()
                yield _dead_letter_rows(table)

    return dead_letters


def rejected_table(batch: pa.RecordBatch, rejections: list[Rejection]) -> pa.Table:
    """The Kafka records of ``rejections`` with their reasons, as the first pass sends them."""
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


def _timestamp_text(micros: int | None) -> str | None:
    """ISO 8601 (UTC) within the writable range; the microseconds since the epoch outside it."""
    if micros is None:
        return None
    if TIMESTAMP_MIN_MICROS <= micros <= TIMESTAMP_MAX_MICROS:
        return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat()
    return str(micros)


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")
