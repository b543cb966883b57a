"""Decode one chunk of JSON values (one Arrow batch of Kafka values) into Arrow tables.

The fast path hands the whole chunk to pyarrow's JSON reader at once: the values,
newline-separated, are one newline-delimited JSON document (a raw line break can only
be whitespace in valid JSON, so line breaks inside values are replaced by spaces
first). When the reader stops at a row, the rows before it are read as one piece and
the row itself is decided alone (:func:`decode_one`); reading goes on after it. Rows
whose types conflict with the rows before them start a new piece, typed on its own.

Whether a value is accepted depends on the value alone, never on its neighbours, so
a replayed micro-batch is decided exactly as before:

- rejected: null (a tombstone), empty or blank, not UTF-8, not JSON, not a JSON object;
- skipped, with ``skip_tombstones`` (Debezium: the null value that follows each delete so
  that log compaction can drop the key): null, counted in :attr:`DecodedChunk.tombstones`;
- accepted: everything pyarrow reads as exactly one object, and what Python's ``json``
  reads as one object where pyarrow does not (duplicate keys, numbers beyond 64 bits,
  arrays of mixed types).

After the first piece the chunk's type is kept as a hint for the next chunks of the
task: read with an explicit schema, values are not re-typed (pyarrow would turn
ISO-8601 strings into timestamps) and new fields are still inferred.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from icesink.jobs.kafka.decode.types import has_timestamps, timestamps_as_strings, without_nulls

PARSE_ERROR = "parse_error"  # reasons, as icesink.schema.primitives.BadRecordReason spells them
OUT_OF_RANGE = "out_of_range"
TYPE_MISMATCH = "type_mismatch"

_ROW = re.compile(r" in row (\d+)\s*$")
_CONFLICT = re.compile(r"Column\((?P<path>[^)]*)\) changed from (?P<old>\w+) to (?P<new>\w+) in row")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Rejection:
    """A value that cannot become a row.

    Attributes:
        index: Its position in the chunk.
        reason: ``parse_error``, ``out_of_range`` or ``type_mismatch``.
        message: What is wrong with it.
    """

    index: int
    reason: str
    message: str


@dataclass
class Piece:
    """Rows of a chunk that share one type.

    Attributes:
        indices: Their positions in the chunk.
        table: Their values, one column per top-level field.
    """

    indices: np.ndarray
    table: pa.Table


@dataclass
class DecodedChunk:
    """What :meth:`ChunkDecoder.decode` made of a chunk: every position is in exactly one place.

    Attributes:
        pieces: The decoded rows.
        rejections: The values that cannot become rows.
        tombstones: The null values skipped (``skip_tombstones``), by position.
    """

    pieces: list[Piece] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    tombstones: list[int] = field(default_factory=list)


class ChunkDecoder:
    """Decodes the chunks of one task in order, keeping the last type seen as a hint.

    Args:
        hint: A schema to read the first chunk with (nothing by default).
        skip_tombstones: Skip null values (see the module docstring) instead of rejecting them.
    """

    def __init__(self, hint: pa.Schema | None = None, *, skip_tombstones: bool = False) -> None:
        self._hint = hint
        self._skip_tombstones = skip_tombstones

    def decode(self, values: pa.Array) -> DecodedChunk:
        """Decode ``values`` (binary or string, possibly null) into pieces and rejections."""
        result = DecodedChunk()
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            values = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
        candidates = _screen(values, result, skip_tombstones=self._skip_tombstones)
        if len(candidates):
            _Reader(self, values, candidates, result).read_all()
        return result

    @property
    def hint(self) -> pa.Schema | None:
        """The schema the next chunk is read with."""
        return self._hint

    def learn(self, schema: pa.Schema) -> None:
        """Read the next values with ``schema`` (its timestamps as strings, its null fields left to infer)."""
        self._hint = without_nulls(timestamps_as_strings(schema)) or None

    def forget(self) -> None:
        """Read the next values without a hint (the last one no longer fits)."""
        self._hint = None


def decode_one(text: bytes) -> pa.Table | Rejection:
    """Decide one value alone, with Python's ``json``: a one-row table, or why not.

    Numbers are read as pyarrow reads them: integers beyond 64 bits as doubles, and a
    number beyond the double range is an error. A field whose values Arrow cannot
    type (an array of numbers and strings) is kept as JSON text.
    """
    try:
        value = json.loads(text.decode("utf-8"), parse_int=_parse_int, parse_float=_parse_float)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
        return Rejection(-1, PARSE_ERROR, f"not valid JSON: {e}")
    if not isinstance(value, dict):
        return Rejection(-1, PARSE_ERROR, f"not a JSON object but {type(value).__name__}")
    columns: dict[str, pa.Array] = {}
    for name, item in value.items():
        try:
            columns[name] = pa.array([item])
        except (pa.ArrowException, TypeError, ValueError, OverflowError):  # mixed types, lone surrogates
            columns[name] = pa.array([json.dumps(item)], pa.string())
    if not columns:  # {}: one row without columns
        return pa.table({"": [None]}).select([])
    try:
        return pa.Table.from_pydict(columns)
    except (pa.ArrowException, UnicodeError) as e:
        return Rejection(-1, PARSE_ERROR, f"cannot be stored: {e}")


class _Reader:
    """Reads the screened values of one chunk with pyarrow, falling back row by row."""

    def __init__(self, decoder: ChunkDecoder, values: pa.Array, candidates: np.ndarray, out: DecodedChunk):
        self._decoder = decoder
        self._values = values
        self._candidates = candidates  # chunk positions of the lines
        self._out = out
        # The lines, newline-terminated, in one contiguous buffer: lines[i] = data[starts[i]:starts[i+1]].
        lines = values if len(candidates) == len(values) else values.take(pa.array(candidates))
        if _has_line_breaks(lines):  # rare (pretty-printed JSON): replacing costs more than parsing
            lines = pc.replace_substring(pc.replace_substring(lines, "\n", " "), "\r", " ")
        joined = pc.binary_join_element_wise(lines, pa.scalar(b"\n", lines.type), pa.scalar(b"", lines.type))
        offset_type = np.int64 if pa.types.is_large_binary(joined.type) else np.int32
        buffers = joined.buffers()
        self._starts = np.frombuffer(buffers[1], dtype=offset_type)[: len(joined) + 1].astype(np.int64)
        self._data = buffers[2]

    def read_all(self) -> None:
        self._read(0, len(self._candidates))

    def _read(self, lo: int, hi: int) -> None:
        """Read lines ``lo..hi`` into pieces and rejections."""
        pos = lo
        while pos < hi:
            hint = self._decoder.hint
            outcome = self._parse(pos, hi, hint)
            if isinstance(outcome, pa.Table):
                if outcome.num_rows != hi - pos:  # a line held several objects: decide line by line
                    self._one_by_one(pos, hi)
                    return
                self._add_piece(pos, hi, outcome, hint)
                return
            row, message = outcome
            if row is None:  # an error pyarrow does not place, e.g. 2.5 for an int64 hint
                if hint is not None:
                    self._decoder.forget()
                    continue
                if hi - pos == 1:
                    self._decide(pos)
                    return
                middle = (pos + hi) // 2
                self._read(pos, middle)
                pos = middle
                continue
            failed = pos + row
            if failed >= hi:
                self._one_by_one(pos, hi)
                return
            conflict = _CONFLICT.search(message)
            if conflict and conflict["path"]:  # a field's type differs from the rows before it
                if hint is not None:
                    self._decoder.forget()
                    continue
                if failed > pos:
                    self._read(pos, failed)
                    pos = failed
                    continue
            elif conflict and conflict["old"] != "object":  # lines pos..failed are not objects
                for line in range(pos, failed):
                    self._decide(line)
                pos = failed
                continue
            if failed > pos:
                self._read(pos, failed)
            self._decide(failed)
            pos = failed + 1

    def _parse(self, lo: int, hi: int, hint: pa.Schema | None) -> pa.Table | tuple[int | None, str]:
        start, end = int(self._starts[lo]), int(self._starts[hi])
        data = self._data.slice(start, end - start)
        options = pj.ParseOptions(explicit_schema=hint, unexpected_field_behavior="infer")
        try:
            return pj.read_json(
                pa.BufferReader(data),
                read_options=pj.ReadOptions(use_threads=False, block_size=max(len(data) + 1, 1 << 16)),
                parse_options=options,
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            message = str(e)
            match = _ROW.search(message)
            return (int(match.group(1)) if match else None), message

    def _add_piece(self, lo: int, hi: int, table: pa.Table, hint: pa.Schema | None) -> None:
        if has_timestamps(table.schema):  # new fields typed as timestamps: read again, keeping the strings
            strings = timestamps_as_strings(table.schema)
            again = self._parse(lo, hi, strings)
            if isinstance(again, pa.Table) and again.num_rows == hi - lo:
                table = again
            else:
                table = table.cast(strings, safe=False)  # unreachable in practice: the same rows read once
        self._decoder.learn(table.schema)
        self._out.pieces.append(Piece(self._candidates[lo:hi], table))

    def _one_by_one(self, lo: int, hi: int) -> None:
        for line in range(lo, hi):
            outcome = self._parse(line, line + 1, None)
            if isinstance(outcome, pa.Table) and outcome.num_rows == 1:
                self._add_piece(line, line + 1, outcome, None)
            else:
                self._decide(line)

    def _decide(self, line: int) -> None:
        index = int(self._candidates[line])
        outcome = decode_one(self._values[index].as_py())
        if isinstance(outcome, Rejection):
            self._out.rejections.append(Rejection(index, outcome.reason, outcome.message))
        else:
            self._out.pieces.append(Piece(self._candidates[line : line + 1], outcome))


def _screen(values: pa.Array, result: DecodedChunk, *, skip_tombstones: bool) -> np.ndarray:
    """The positions worth parsing; the others (null, blank, not UTF-8) are rejected, or skipped."""
    rejections = result.rejections
    bad = np.zeros(len(values), dtype=bool)
    nulls = values.is_null().to_numpy(zero_copy_only=False)
    if skip_tombstones:
        result.tombstones.extend(int(index) for index in np.flatnonzero(nulls))
    else:
        for index in np.flatnonzero(nulls):
            rejections.append(Rejection(int(index), PARSE_ERROR, "null value (a tombstone)"))
    bad |= nulls
    blank = pc.fill_null(pc.match_substring_regex(values, r"^[ \t\r\n]*$"), False).to_numpy(
        zero_copy_only=False
    )
    for index in np.flatnonzero(blank):
        rejections.append(Rejection(int(index), PARSE_ERROR, "empty value"))
    bad |= blank
    try:
        values.cast(pa.large_string() if pa.types.is_large_binary(values.type) else pa.string())
    except pa.ArrowInvalid:
        for position, value in enumerate(values.to_pylist()):
            if value is None or bad[position]:
                continue
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as e:
                rejections.append(Rejection(position, PARSE_ERROR, f"not UTF-8: {e}"))
                bad[position] = True
    # Only objects go to pyarrow: anything else is rejected, and a leading ``null`` crashes
    # pyarrow 26's reader (a segmentation fault), where a ``null`` after an object is read as a row.
    objects = pc.fill_null(pc.match_substring_regex(values, r"^[ \t\r\n]*\{"), False)
    for index in np.flatnonzero(~objects.to_numpy(zero_copy_only=False) & ~bad):
        outcome = decode_one(values[int(index)].as_py())
        message = outcome.message if isinstance(outcome, Rejection) else "not a JSON object"
        rejections.append(Rejection(int(index), PARSE_ERROR, message))
        bad[index] = True
    return np.flatnonzero(~bad)


def _has_line_breaks(values: pa.Array) -> bool:
    data = values.buffers()[2]
    if data is None or len(values) == 0:
        return False
    # Only the values' own bytes: a slice's data buffer is its parent's, all of it.
    offset_type = np.int64 if pa.types.is_large_binary(values.type) else np.int32
    offsets = np.frombuffer(values.buffers()[1], dtype=offset_type)
    start, end = int(offsets[values.offset]), int(offsets[values.offset + len(values)])
    text = data.slice(start, end - start).to_pybytes()  # one copy, then memchr: faster than a kernel
    return b"\n" in text or b"\r" in text


def _parse_int(text: str) -> int | float:
    number = int(text)
    return number if _INT64_MIN <= number <= _INT64_MAX else float(text)


def _parse_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise ValueError(f"number {text[:40]} is too big to be stored in double")
    return number
