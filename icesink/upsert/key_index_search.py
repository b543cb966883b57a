"""Key index links searched by key: a blob's entries kept sorted, found by binary search, merged in order.

A blob is written sorted by key (:func:`~icesink.upsert.key_index.encode_blob`), and a
partition's full blob holds every key of it (about 625,000 at 10M keys in 16 buckets).
Joining it with the few thousand keys a batch has in the partition costs a pass over the
whole blob on every batch; a binary search over its keys (``numpy.searchsorted``) costs
the batch's keys only. Writing the full blob again is the same: the old one with the
newer links' keys taken out and their entries merged in, in order, instead of a join over
the whole partition and a sort of it.

That needs the key as one array of numbers, so a :class:`Link` has sorted keys only for a
key of one integer column (the usual ``id``). Any other key (several columns, a string)
keeps the hash joins of :mod:`icesink.upsert.key_index_entries`, as do overlays (a
snapshot's entries not yet written: few and unsorted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from icesink.upsert.key_index_entries import anti_join, concat_dictionary, newest_entries, semi_join


@dataclass(frozen=True)
class Link:
    """One link of a partition's chain: its entries and, when they are sorted by a key of
    one integer column, that column as a numpy array (``None``: searched by joins)."""

    entries: pa.Table
    sorted_keys: np.ndarray | None = None

    @classmethod
    def of_blob(cls, entries: pa.Table, key_columns: Sequence[str]) -> Link:
        """A decoded blob as a link, searchable when its key is one integer column.

        Blobs are written sorted; one that is not (written by other code) is sorted here,
        once, as it enters the cache.
        """
        keys = integer_keys(entries, key_columns)
        if keys is None:
            return cls(entries)
        if len(keys) > 1 and not bool(np.all(keys[1:] >= keys[:-1])):
            order = np.argsort(keys, kind="stable")
            return cls(entries.take(pa.array(order)), keys[order])
        return cls(entries, keys)

    def split(self, keys: pa.Table, names: list[str]) -> tuple[pa.Table, pa.Table]:
        """The entries of ``keys`` (distinct rows of the key columns) in this link, and the
        keys it holds no entry of."""
        sorted_keys = self.sorted_keys
        wanted = integer_keys(keys, names) if sorted_keys is not None else None
        if sorted_keys is None or wanted is None:
            hits = semi_join(self.entries, keys, names)
            return hits, anti_join(keys, hits.select(names), names)
        held, rows = find(sorted_keys, wanted)
        return self.entries.take(pa.array(rows)), keys.filter(pa.array(~held))


def integer_keys(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray | None:
    """The key of ``table`` as a numpy array (``None``: not one integer column without nulls)."""
    if len(key_columns) != 1:
        return None
    column = table.column(key_columns[0])
    if not pa.types.is_integer(column.type) or column.null_count:
        return None
    return np.asarray(column.combine_chunks().to_numpy(), dtype=np.int64)


def find(sorted_keys: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which of ``wanted`` are in ``sorted_keys`` (a mask over ``wanted``), and the rows of
    ``sorted_keys`` holding one, ascending (every row of a key held more than once)."""
    distinct, inverse = np.unique(wanted, return_inverse=True)
    starts = np.searchsorted(sorted_keys, distinct, side="left")
    counts = np.searchsorted(sorted_keys, distinct, side="right") - starts
    return (counts > 0)[inverse], _ranges(starts, counts)


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenated ranges ``starts[i] .. starts[i] + counts[i]`` (int64)."""
    total = int(counts.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
    return offsets.astype(np.int64) + np.arange(total, dtype=np.int64)


def merged_in_order(links: Sequence[Link], key_schema: pa.Schema) -> pa.Table | None:
    """Every live entry of a chain, sorted by key: the oldest link's (a full blob, searchable)
    but those of the keys the newer links hold, and the newer links' newest live entries,
    merged in. ``None`` when the oldest link is not searchable (merge by joins instead)."""
    base = links[0] if links else None
    names = key_schema.names
    if base is None or base.sorted_keys is None:
        return None
    newer = newest_entries([link.entries for link in links[1:]], key_schema, keep_deleted=True)
    newer_keys = integer_keys(newer, names)
    if newer_keys is None:
        return None
    _, replaced = find(base.sorted_keys, newer_keys)
    kept = np.ones(len(base.sorted_keys), dtype=bool)
    kept[replaced] = False
    valid = pc.is_valid(newer.column("file_path"))
    live, live_keys = newer.filter(valid), newer_keys[np.asarray(valid)]
    kept_rows = np.flatnonzero(kept)
    # Two runs, each sorted (the base's kept keys, then the newer's): a stable sort merges them.
    order = np.argsort(np.concatenate([base.sorted_keys[kept_rows], live_keys]), kind="stable")
    rows = np.concatenate([kept_rows, len(base.sorted_keys) + np.arange(live.num_rows)])[order]
    return concat_dictionary([base.entries, live], key_schema).take(pa.array(rows))
