"""Debezium change events unwrapped: the row, its operation and its source timestamp."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa

from icesink.jobs.kafka.decode.chunk import ChunkDecoder
from icesink.jobs.kafka.decode.debezium import OP_COLUMN, SOURCE_TS_COLUMN, unwrap

TS_MS = 1_700_000_000_000
EVENTS: list[dict[str, object]] = [
    {"before": None, "after": {"id": 1, "name": "a"}, "op": "c", "source": {"ts_ms": TS_MS, "db": "shop"}},
    {
        "before": {"id": 1, "name": "a"},
        "after": {"id": 1, "name": "b", "vip": True},
        "op": "u",
        "source": {"ts_ms": TS_MS + 1},
    },
    {"before": {"id": 1, "name": "b"}, "after": None, "op": "d", "source": {"ts_ms": TS_MS + 2}},
    {"before": None, "after": None, "op": "t", "source": {"ts_ms": TS_MS + 3}},
]


def parsed(values: list[dict[str, object]]) -> pa.Table:
    result = ChunkDecoder().decode(pa.array([json.dumps(v).encode() for v in values]))
    assert len(result.pieces) == 1 and not result.rejections
    return result.pieces[0].table


def test_after_is_the_row_and_a_delete_keeps_its_before() -> None:
    unwrapped = unwrap(parsed(EVENTS))
    rows = unwrapped.table.to_pylist()
    assert [r[OP_COLUMN] for r in rows] == ["c", "u", "d", "t"]
    assert [(r["id"], r["name"], r["vip"]) for r in rows] == [
        (1, "a", None),
        (1, "b", True),
        (1, "b", None),
        (None, None, None),
    ]
    assert rows[0][SOURCE_TS_COLUMN] == dt.datetime.fromtimestamp(TS_MS / 1000, dt.UTC)
    assert unwrapped.kept.tolist() == [0, 1, 2, 3]
    assert unwrapped.rejected.tolist() == []


def test_the_envelope_under_payload_with_schemas_enabled() -> None:
    rows = unwrap(
        parsed([{"schema": {"type": "struct"}, "payload": e} for e in EVENTS[:3]])
    ).table.to_pylist()
    assert [(r["id"], r["name"], r[OP_COLUMN]) for r in rows] == [(1, "a", "c"), (1, "b", "u"), (1, "b", "d")]


def test_values_that_are_not_change_events_are_rejected() -> None:
    unwrapped = unwrap(parsed([EVENTS[0], {"id": 7}]))
    assert unwrapped.kept.tolist() == [0]
    assert unwrapped.rejected.tolist() == [1]
    assert "not a Debezium change event" in unwrapped.message
    no_op = unwrap(parsed([{"id": 7}]))
    assert no_op.table.num_rows == 0 and no_op.rejected.tolist() == [0]
