"""Split an Arrow batch into runs of rows that share a partition value."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COUNTING_SORT_SPAN = 4096
"""Group codes spanning at most this many values are sorted by Arrow (see :func:`_stable_order`)."""


def arrow_bytes(batch: pa.RecordBatch) -> int:
    """The Arrow size of ``batch``, cheaply.

    ``nbytes`` walks and de-duplicates every buffer (tens of microseconds a batch); the
    total buffer size is the same number for a batch that is not a slice, which is what
    Spark hands a Python worker. Slices fall back to ``nbytes``.
    """
    if any(column.offset for column in batch.columns):
        return int(batch.nbytes)
    return int(batch.get_total_buffer_size())


def chunked(batches: Iterable[pa.RecordBatch], target_bytes: int) -> Iterator[pa.RecordBatch]:
    """Merge consecutive batches into batches of at least ``target_bytes`` (the last may be smaller).

    Spark hands a Python worker batches of ``maxRecordsPerBatch`` rows (10,000 by
    default). Split by partition value, a batch of the reference workload gives 64
    pieces of about 150 rows, and per-piece costs (slicing, buffering, merging) then
    outweigh the data's. Splitting a few megabytes at a time makes the pieces a hundred
    times larger for one copy of the rows. Empty batches are dropped.
    """
    buffer = ChunkBuffer(target_bytes)
    for batch in batches:
        chunk = buffer.add(batch)
        if chunk is not None:
            yield chunk
    last = buffer.flush()
    if last is not None:
        yield last


class ChunkBuffer:
    """:func:`chunked` for rows pushed one batch at a time (a writer that does not pull them)."""

    def __init__(self, target_bytes: int) -> None:
        self._target = target_bytes
        self._pending: list[pa.RecordBatch] = []
        self._bytes = 0

    def add(self, batch: pa.RecordBatch) -> pa.RecordBatch | None:
        """Buffer ``batch``; the merged chunk once the buffer holds ``target_bytes``."""
        if batch.num_rows == 0:
            return None
        self._pending.append(batch)
        self._bytes += arrow_bytes(batch)
        return self.flush() if self._bytes >= self._target else None

    def flush(self) -> pa.RecordBatch | None:
        """What is buffered, merged into one batch (``None`` when nothing is)."""
        pending, self._pending, self._bytes = self._pending, [], 0
        if not pending:
            return None
        return pending[0] if len(pending) == 1 else pa.concat_batches(pending)


def split_by_key(
    keys: list[pa.Array], rows: pa.RecordBatch
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """Yield ``(key values, rows with that key)`` for every distinct key in the batch.

    Each key column is dictionary-encoded once; the codes are combined into one int64
    group code, so the batch is sorted (a single ``take``) only when it holds more than
    one key, which after a bucket shuffle is the exception. Nulls are a key value.

    Args:
        keys: Key columns, each of ``rows.num_rows`` values.
        rows: The rows to split.
    """
    n = rows.num_rows
    if n == 0:
        return
    if not keys:
        yield (), rows
        return
    codes = np.zeros(n, dtype=np.int64)
    span = 1  # the codes are in range(span)
    dictionaries = []
    for column in keys:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        size = len(encoded.dictionary)
        span *= size
        codes = codes * size + encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        dictionaries.append((encoded.indices, encoded.dictionary))

    def key_at(row: int) -> tuple[Any, ...]:
        return tuple(dictionary[indices[row].as_py()].as_py() for indices, dictionary in dictionaries)

    if codes[0] == codes[-1] and (codes == codes[0]).all():
        yield key_at(0), rows
        return
    order = _stable_order(codes, span)
    sorted_codes = codes[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_codes)) + 1))
    ends = np.append(starts[1:], n)
    ordered = rows.take(pa.array(order))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        yield key_at(int(order[start])), ordered.slice(start, end - start)


def _stable_order(codes: np.ndarray[Any, np.dtype[np.int64]], span: int) -> np.ndarray[Any, Any]:
    """The indices that sort ``codes`` (all in ``range(span)``), equal codes in input order.

    Arrow's stable sort counts instead of comparing when the codes span at most
    :data:`COUNTING_SORT_SPAN` values, an order of magnitude faster than NumPy's; above that
    it compares, slower than NumPy (``benchmarks/README.md``, "Figures behind the code's
    thresholds").
    """
    if span <= COUNTING_SORT_SPAN:
        order: np.ndarray[Any, Any] = pc.sort_indices(codes).to_numpy()
        return order
    return np.argsort(codes, kind="stable")
