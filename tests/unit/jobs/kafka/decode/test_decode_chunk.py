"""One chunk of JSON values into Arrow tables: every value accepted or rejected, by itself alone."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from icesink.jobs.kafka.decode.chunk import (
    PARSE_ERROR,
    ChunkDecoder,
    DecodedChunk,
    _has_line_breaks,
    decode_one,
)

GOOD: list[bytes | None] = [
    b'{"id": 1, "name": "a"}',
    b'{"id": 2, "name": "b", "extra": true}',
    b'{"id": "three"}',
    b'{"nested": {"x": 1, "y": [1, 2]}}',
    b'{"id": 1, "id": 2}',  # duplicate keys: Python's json keeps the last
    b'{"big": 123456789012345678901234}',  # beyond 64 bits: a double, as pyarrow reads it
    b'{"mixed": [1, "a", null]}',  # Arrow cannot type it: kept as JSON text
    b'{"when": "2024-05-01T12:00:00Z"}',
    b'{\n  "pretty": 1\n}',
    b"{}",
    b'  {"padded": 1}  ',
]
BAD: list[bytes | None] = [
    None,
    b"",
    b"   ",
    b'{"id": 1',
    b"[1, 2]",
    b"42",
    b'"text"',
    b"null",
    b'{"a": 1}{"a": 2}',
    b'{"a": 1} trailing',
    b'{"a": "\xff"}',
    b"{'single': 1}",
    b'{"a": 1e999}',
    b"not json at all",
]


def decode(values: Sequence[bytes | None], decoder: ChunkDecoder | None = None) -> DecodedChunk:
    return (decoder or ChunkDecoder()).decode(pa.array(values, pa.binary()))


def accepted_rows(result: DecodedChunk) -> dict[int, dict[str, object]]:
    rows: dict[int, dict[str, object]] = {}
    for piece in result.pieces:
        for index, row in zip(piece.indices, piece.table.to_pylist(), strict=True):
            rows[int(index)] = {k: v for k, v in row.items() if v is not None}
    return rows


def test_every_value_is_accepted_or_rejected_exactly_once() -> None:
    values = [v for pair in zip(GOOD, BAD, strict=False) for v in pair] + GOOD[len(BAD) :]
    result = decode(values)
    accepted = [int(i) for p in result.pieces for i in p.indices]
    rejected = [r.index for r in result.rejections]
    assert sorted(accepted + rejected) == list(range(len(values)))
    assert {values[i] for i in rejected} == set(BAD[: len(GOOD)]) | set(BAD[len(GOOD) :]) & set(values)
    assert all(r.reason == PARSE_ERROR and r.message for r in result.rejections)


def test_values_keep_their_content() -> None:
    rows = accepted_rows(decode(GOOD))
    assert rows[0] == {"id": 1, "name": "a"}
    assert rows[2] == {"id": "three"}
    assert rows[3] == {"nested": {"x": 1, "y": [1, 2]}}
    assert rows[4] == {"id": 2}
    assert rows[5] == {"big": pytest.approx(1.2345678901234568e23)}
    assert rows[6] == {"mixed": '[1, "a", null]'}
    assert rows[7] == {"when": "2024-05-01T12:00:00Z"}  # a string, not a timestamp
    assert rows[8] == {"pretty": 1}
    assert rows[10] == {"padded": 1}


def test_rejections_say_why() -> None:
    result = decode([None, b"  ", b'{"a": "\xff"}', b"[1]", b'{"a":'])
    messages = {r.index: r.message for r in result.rejections}
    assert "tombstone" in messages[0]
    assert "empty" in messages[1]
    assert "UTF-8" in messages[2]
    assert "not a JSON object" in messages[3]
    assert "not valid JSON" in messages[4]


def test_conflicting_types_split_the_chunk_into_pieces() -> None:
    result = decode([b'{"a": 1}', b'{"a": 2}', b'{"a": "x"}', b'{"a": {"b": 1}}', b'{"a": 3}'])
    assert not result.rejections
    types = [p.table.schema.field("a").type for p in result.pieces]
    assert pa.int64() in types and pa.string() in types and any(pa.types.is_struct(t) for t in types)
    assert sorted(int(i) for p in result.pieces for i in p.indices) == [0, 1, 2, 3, 4]


def test_timestamp_like_strings_stay_strings_and_the_hint_keeps_them() -> None:
    decoder = ChunkDecoder()
    first = decode([b'{"ts": "2024-05-01T00:00:00Z", "n": 1}'], decoder)
    assert first.pieces[0].table.schema.field("ts").type == pa.string()
    assert decoder.hint is not None and decoder.hint.field("ts").type == pa.string()
    second = decode([b'{"ts": "2024-05-02 00:00:00", "n": 2, "new": "2024-01-01"}'], decoder)
    row = second.pieces[0].table.to_pylist()[0]
    assert row == {"ts": "2024-05-02 00:00:00", "n": 2, "new": "2024-01-01"}


def test_a_hint_that_no_longer_fits_is_dropped() -> None:
    decoder = ChunkDecoder()
    decode([b'{"n": 1}'], decoder)
    result = decode([b'{"n": 2.5}', b'{"n": "text"}'], decoder)
    assert not result.rejections
    assert accepted_rows(result) == {0: {"n": 2.5}, 1: {"n": "text"}}


def test_string_values_are_read_as_their_bytes() -> None:
    result = ChunkDecoder().decode(pa.array(['{"a": "é"}', None]))
    assert accepted_rows(result) == {0: {"a": "é"}}
    assert [r.index for r in result.rejections] == [1]


def test_a_slice_is_looked_at_for_line_breaks_in_its_own_values_only() -> None:
    values = pa.array([b'{"a": 1}', b'{"a": 2}', b'{\n"a": 3}', b'{"a": 4}'])
    assert _has_line_breaks(values) and _has_line_breaks(values.slice(2, 1))
    assert not _has_line_breaks(values.slice(0, 2)) and not _has_line_breaks(values.slice(3))
    assert accepted_rows(ChunkDecoder().decode(values.slice(1, 3))) == {0: {"a": 2}, 1: {"a": 3}, 2: {"a": 4}}


def test_decode_one_reads_numbers_as_pyarrow_does() -> None:
    table = decode_one(b'{"i": 9223372036854775807, "big": 9223372036854775808, "f": 1.5}')
    assert isinstance(table, pa.Table)
    assert table.schema.field("i").type == pa.int64()
    assert table.schema.field("big").type == pa.float64()
    assert not isinstance(decode_one(b'{"f": 1e400}'), pa.Table)


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.sampled_from(GOOD + BAD), min_size=1, max_size=40))
def test_a_values_fate_does_not_depend_on_its_neighbours(values: list[bytes | None]) -> None:
    together = decode(values)
    alone = [decode([v]) for v in values]
    rejected_together = {r.index for r in together.rejections}
    rejected_alone = {i for i, result in enumerate(alone) if result.rejections}
    assert rejected_together == rejected_alone
    rows = accepted_rows(together)
    for index, result in enumerate(alone):
        if index not in rejected_alone:
            assert json.dumps(rows[index], sort_keys=True, default=str) == json.dumps(
                accepted_rows(result)[0], sort_keys=True, default=str
            )
