"""The upsert key index of one snapshot, in memory: look keys up, apply a snapshot's changes, write it.

Each partition's index is a chain of links, oldest first: blobs of Puffin files
(:mod:`icesink.upsert.key_index`, read on first use and kept in a :class:`LinkCache`
within its byte budget) and overlays not yet written (the changes applied since). A link
holds entries ``key -> (file_path, pos)``, several for a key stored more than once, and
``file_path`` null for a key deleted. The newest link holding a key has ALL its live
entries: a change of a key writes every live entry of it again, so a lookup reads the
links newest first and stops for a key at the first link holding it. A cached blob of a
key of one integer column is searched by binary search, a full blob written again merged
in order (:mod:`icesink.upsert.key_index_search`); other links are joined.

:meth:`KeyIndex.apply` takes what a snapshot changed (:class:`IndexStep`: data files added
with their keys, data files removed, positions deleted) and adds one overlay per
partition it touched, holding the new live entries of every key it touched; a partition
whose files were rewritten (a compaction) or new to the index gets its whole state instead,
computed at once (:mod:`icesink.upsert.key_index_entries`). :meth:`KeyIndex.blobs` turns
the overlays into one blob per partition: a delta, or a full blob (:func:`full_blobs`:
when the chain would grow past its links or names a file the table no longer registers,
and a share of the longest chains in every commit, so that full blobs spread over the
commits).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.io import FileIO

from icesink.upsert.candidates import KeyCandidates
from icesink.upsert.key_index import BlobRef, Partition, encode_blob, read_blob
from icesink.upsert.key_index_entries import (
    anti_join,
    as_entries,
    at,
    concat,
    distinct,
    entry_schema,
    newest_entries,
    partition_state,
)
from icesink.upsert.key_index_search import Link, merged_in_order

# Most links of a partition's chain: the next change writes the partition's full blob.
DEFAULT_MAX_LINKS = 8
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024


class LinkCache:
    """Decoded blobs by where they live (as :class:`Link`: searchable by key when they can
    be), the least recently used dropped past ``budget_bytes``."""

    def __init__(self, budget_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._budget = budget_bytes
        self._links: OrderedDict[BlobRef, Link] = OrderedDict()
        self._bytes = 0
        self.entries_read = 0  # entries decoded from blobs (not served from memory)

    def get(self, file_io: FileIO, ref: BlobRef, key_columns: Sequence[str]) -> Link:
        link = self._links.get(ref)
        if link is not None:
            self._links.move_to_end(ref)
            return link
        table = read_blob(file_io, ref, key_columns)
        self.entries_read += table.num_rows
        return self.put(ref, table, key_columns)

    def put(self, ref: BlobRef, table: pa.Table, key_columns: Sequence[str]) -> Link:
        """Keep a blob's decoded entries (a blob just written, or read)."""
        link = self._links.get(ref)
        if link is not None:
            return link
        link = self._links[ref] = Link.of_blob(table, key_columns)
        self._bytes += link.entries.nbytes
        while self._bytes > self._budget and len(self._links) > 1:
            _, dropped = self._links.popitem(last=False)
            self._bytes -= dropped.entries.nbytes
        return link


@dataclass(frozen=True)
class Chain:
    """One partition's links: written blobs, then overlays not yet written (oldest first)."""

    refs: tuple[BlobRef, ...] = ()
    overlays: tuple[pa.Table, ...] = ()


@dataclass(frozen=True)
class IndexStep:
    """What commits changed, by partition.

    Attributes:
        added: Entries of the data files added (key columns, ``file_path``, ``pos``).
        removed: Data files removed.
        deleted: Positions deleted (``file_path``, ``pos``).
        replaced: Instead of ``removed`` and ``deleted``: the entries a batch's lookup found,
            in this index, for every key it adds or deletes, all deleted by the batch (no
            link is then searched for what the batch deleted).
    """

    added: dict[Partition, pa.Table] = field(default_factory=dict)
    removed: dict[Partition, set[str]] = field(default_factory=dict)
    deleted: dict[Partition, pa.Table] = field(default_factory=dict)
    replaced: dict[Partition, pa.Table] | None = None

    def partitions(self) -> set[Partition]:
        return set(self.added) | set(self.removed) | set(self.deleted) | set(self.replaced or {})


class KeyIndex:
    """The key index of one snapshot (``None``: the table before its first snapshot).

    Args:
        snapshot_id: The snapshot it describes.
        key_schema: The key columns and their Arrow types.
        chains: Each partition's links.
        file_io: Where the blobs are read.
        cache: The decoded blobs, shared with the views that follow.
    """

    def __init__(
        self,
        snapshot_id: int | None,
        key_schema: pa.Schema,
        chains: dict[Partition, Chain],
        file_io: FileIO,
        cache: LinkCache,
    ) -> None:
        self.snapshot_id = snapshot_id
        self.key_schema = key_schema
        self.chains = chains
        self._io = file_io
        self.cache = cache

    @property
    def key_columns(self) -> list[str]:
        return list(self.key_schema.names)

    def links(self, partition: Partition) -> list[pa.Table]:
        """The partition's links' entries, oldest first (blobs read as needed)."""
        return [link.entries for link in self.searchable_links(partition)]

    def searchable_links(self, partition: Partition) -> list[Link]:
        """The partition's links, oldest first: its blobs (searchable by key when they can
        be), then its overlays (searched by joins)."""
        chain = self.chains.get(partition, Chain())
        blobs = [self.cache.get(self._io, ref, self.key_columns) for ref in chain.refs]
        return blobs + [Link(overlay) for overlay in chain.overlays]

    def live(self, partition: Partition, keys: pa.Table) -> pa.Table:
        """The live entries of ``keys`` (key columns, distinct rows) in the partition."""
        remaining, found = keys, []
        for link in reversed(self.searchable_links(partition)):
            if remaining.num_rows == 0:
                break
            hits, remaining = link.split(remaining, self.key_columns)
            if hits.num_rows:
                found.append(as_entries(hits.filter(pc.is_valid(hits.column("file_path"))), self.key_schema))
        return concat(found, self.key_schema)

    def lookup(self, candidates: KeyCandidates) -> dict[Partition, pa.Table]:
        """The live entries of the candidates' keys, in each partition that may hold one."""
        found: dict[Partition, pa.Table] = {}
        for partition in self.chains:
            spec_id, values = partition
            if spec_id not in candidates.spec_ids:
                continue
            keys = candidates.in_partition(spec_id, values)
            if keys.num_rows == 0:
                continue
            entries = self.live(partition, keys.rename_columns(self.key_columns))
            if entries.num_rows:
                found[partition] = entries
        return found

    def apply(self, step: IndexStep, snapshot_id: int | None) -> KeyIndex:
        """The index of ``snapshot_id``: this one with ``step`` applied (an overlay per partition touched)."""
        chains = dict(self.chains)
        names = self.key_columns
        for partition in step.partitions():
            chain = chains.get(partition, Chain())
            if step.replaced is not None:
                overlay = self._looked_up(step.added.get(partition), step.replaced.get(partition))
                chains[partition] = Chain(chain.refs, (*chain.overlays, overlay))
                continue
            added = step.added.get(partition)
            removed = step.removed.get(partition, set())
            deleted = step.deleted.get(partition)
            if removed or not (chain.refs or chain.overlays):
                # files rewritten (a compaction), or a partition new to the index: its whole state, by number
                live, _ = self.merged(partition)
                state = partition_state(live, self.key_schema, added, removed, deleted)
                chains[partition] = Chain((), (state,))  # no link before it: written in full
                continue
            touched = [added.select(names)] if added is not None else []
            for link in self.links(partition):
                touched.append(at(link, removed, deleted).select(names))
            keys = distinct(concat([t.cast(self.key_schema) for t in touched], self.key_schema), names)
            if keys.num_rows == 0:
                continue
            entries = pa.concat_tables(
                [
                    self.live(partition, keys),
                    *([as_entries(added, self.key_schema)] if added is not None else []),
                ]
            )
            gone = at(entries, removed, deleted)
            if gone.num_rows:
                entries = anti_join(entries, gone, [*names, "file_path", "pos"])
            missing = anti_join(keys, entries.select(names), names)
            tombstones = pa.table(
                [
                    *missing.columns,
                    pa.nulls(missing.num_rows, pa.string()),
                    pa.nulls(missing.num_rows, pa.int64()),
                ],
                schema=entry_schema(self.key_schema),
            )
            chains[partition] = Chain(chain.refs, (*chain.overlays, pa.concat_tables([entries, tombstones])))
        return KeyIndex(snapshot_id, self.key_schema, chains, self._io, self.cache)

    def _looked_up(self, added: pa.Table | None, replaced: pa.Table | None) -> pa.Table:
        """A partition's overlay after a batch whose lookup found ``replaced``: its added
        entries, and the keys it deleted that it did not add again as deleted."""
        names, schema = self.key_columns, entry_schema(self.key_schema)
        entries = as_entries(added, self.key_schema) if added is not None else schema.empty_table()
        gone = (
            replaced.select(names).cast(self.key_schema)
            if replaced is not None
            else self.key_schema.empty_table()
        )
        missing = anti_join(distinct(gone, names), entries.select(names), names)
        tombstones = pa.table(
            [
                *missing.columns,
                pa.nulls(missing.num_rows, pa.string()),
                pa.nulls(missing.num_rows, pa.int64()),
            ],
            schema=schema,
        )
        return pa.concat_tables([entries, tombstones])

    def merged(self, partition: Partition) -> tuple[pa.Table, bool]:
        """The partition's every live entry, and whether it is sorted by key already (merged
        in order into a searchable full blob: :func:`~icesink.upsert.key_index_search.merged_in_order`)."""
        links = self.searchable_links(partition)
        in_order = merged_in_order(links, self.key_schema)
        if in_order is not None:
            return in_order, True
        return newest_entries([link.entries for link in links], self.key_schema, keep_deleted=False), False

    def blobs(
        self, registered: Iterable[str], max_links: int = DEFAULT_MAX_LINKS
    ) -> tuple[list[bytes], dict[Partition, list[BlobRef | int]], dict[int, pa.Table]]:
        """The blobs a file for this view must hold, every partition's chain (its own blobs by
        number) and the entries of each new blob (to keep decoded).

        Which partitions get a full blob: :func:`full_blobs`.
        """
        known = set(registered)
        blobs: list[bytes] = []
        tables: dict[int, pa.Table] = {}
        chains: dict[Partition, list[BlobRef | int]] = {}
        full_ones = full_blobs(self.chains, known, max_links)
        for partition, chain in self.chains.items():
            stale = any(ref.path not in known for ref in chain.refs)
            if not chain.overlays and not stale:
                chains[partition] = list(chain.refs)
                continue
            full = partition in full_ones
            if full:
                entries, in_order = self.merged(partition)
            else:
                entries = newest_entries(chain.overlays, self.key_schema, keep_deleted=True)
                in_order = False
            if full and entries.num_rows == 0:
                continue  # the partition holds no key any more
            payload, tables[len(blobs)] = encode_blob(entries, self.key_columns, in_order)
            blobs.append(payload)
            chains[partition] = [len(blobs) - 1] if full else [*chain.refs, len(blobs) - 1]
        return blobs, chains, tables

    def written(self, snapshot_id: int | None, chains: dict[Partition, tuple[BlobRef, ...]]) -> KeyIndex:
        """This view once written with these chains (no overlays left)."""
        return KeyIndex(
            snapshot_id, self.key_schema, {p: Chain(c) for p, c in chains.items()}, self._io, self.cache
        )


def full_blobs(chains: dict[Partition, Chain], registered: set[str], max_links: int) -> set[Partition]:
    """The partitions a commit writes in full: folds spread over the commits.

    A chain must be written in full when it has no blob yet, names a file the table no
    longer registers, or would grow past ``max_links``. A stream that changes every
    partition in every batch would otherwise fold them all in the same commit, one batch
    in ``max_links`` paying for every partition's full blob. So each commit also folds,
    longest chains first, up to its share, one in ``max_links`` of the partitions it
    changes, among the chains at least a quarter that long: the folds of such a stream
    spread evenly over the commits, and a partition changed seldom is not folded early.
    """
    changed = {p: c for p, c in chains.items() if c.overlays}
    must = {
        p
        for p, c in chains.items()
        if (c.overlays or any(r.path not in registered for r in c.refs))
        and (not c.refs or any(r.path not in registered for r in c.refs) or len(c.refs) + 1 > max_links)
    }
    share = -(-len(changed) // max_links)
    early = sorted(
        (p for p, c in changed.items() if p not in must and 4 * len(c.refs) >= max_links),
        key=lambda p: (-len(changed[p].refs), repr(p)),
    )
    return must | set(early[: max(0, share - len(must))])
