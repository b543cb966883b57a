"""The upsert key index of one snapshot, in memory: look keys up, apply a snapshot's changes, write it.

Each partition's index is a chain of links, oldest first: blobs of Puffin files
(:mod:`icesink.upsert.key_index`, read on first use and kept in a :class:`LinkCache`
within its byte budget) and overlays not yet written (the changes applied since). A link
holds entries ``key -> (file_path, pos)``, several for a key stored more than once, and
``file_path`` null for a key deleted. The newest link holding a key has ALL its live
entries: a change of a key writes every live entry of it again, so a lookup reads the
links newest first and stops for a key at the first link holding it.

:meth:`KeyIndex.apply` takes what a snapshot changed (:class:`IndexStep`: data files added
with their keys, data files removed, positions deleted) and adds one overlay per
partition it touched, holding the new live entries of every key it touched.
:meth:`KeyIndex.blobs` turns the overlays into one blob per partition: a delta, or a full
blob when the chain would grow past its links or names a file the table no longer
registers (expired with its snapshot).
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

# Most links of a partition's chain: the next change writes the partition's full blob.
DEFAULT_MAX_LINKS = 8
DEFAULT_CACHE_BYTES = 512 * 1024 * 1024
_POSITION_BITS = 40  # a data file's rows: positions below 2**40


class LinkCache:
    """Decoded blobs by where they live, the least recently used dropped past ``budget_bytes``."""

    def __init__(self, budget_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._budget = budget_bytes
        self._tables: OrderedDict[BlobRef, pa.Table] = OrderedDict()
        self._bytes = 0
        self.entries_read = 0  # entries decoded from blobs (not served from memory)

    def get(self, file_io: FileIO, ref: BlobRef, key_columns: Sequence[str]) -> pa.Table:
        table = self._tables.get(ref)
        if table is not None:
            self._tables.move_to_end(ref)
            return table
        table = read_blob(file_io, ref, key_columns)
        self.entries_read += table.num_rows
        self.put(ref, table)
        return table

    def put(self, ref: BlobRef, table: pa.Table) -> None:
        if ref in self._tables:
            return
        self._tables[ref] = table
        self._bytes += table.nbytes
        while self._bytes > self._budget and len(self._tables) > 1:
            _, dropped = self._tables.popitem(last=False)
            self._bytes -= dropped.nbytes


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
        """The partition's links, oldest first (blobs read as needed)."""
        chain = self.chains.get(partition, Chain())
        return [self.cache.get(self._io, ref, self.key_columns) for ref in chain.refs] + list(chain.overlays)

    def live(self, partition: Partition, keys: pa.Table) -> pa.Table:
        """The live entries of ``keys`` (key columns, distinct rows) in the partition."""
        remaining, found = keys, []
        for link in reversed(self.links(partition)):
            if remaining.num_rows == 0:
                break
            hits = _semi_join(link, remaining, self.key_columns)
            if hits.num_rows:
                found.append(_as_entries(hits.filter(pc.is_valid(hits.column("file_path"))), self.key_schema))
                remaining = _anti_join(remaining, hits.select(self.key_columns), self.key_columns)
        return _concat(found, self.key_schema)

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
            touched = [added.select(names)] if added is not None else []
            for link in self.links(partition):
                touched.append(_at(link, removed, deleted).select(names))
            keys = _distinct(_concat([t.cast(self.key_schema) for t in touched], self.key_schema), names)
            if keys.num_rows == 0:
                continue
            entries = pa.concat_tables(
                [
                    self.live(partition, keys),
                    *([_as_entries(added, self.key_schema)] if added is not None else []),
                ]
            )
            gone = _at(entries, removed, deleted)
            if gone.num_rows:
                entries = _anti_join(entries, gone, [*names, "file_path", "pos"])
            missing = _anti_join(keys, entries.select(names), names)
            tombstones = pa.table(
                [
                    *missing.columns,
                    pa.nulls(missing.num_rows, pa.string()),
                    pa.nulls(missing.num_rows, pa.int64()),
                ],
                schema=_entry_schema(self.key_schema),
            )
            chains[partition] = Chain(chain.refs, (*chain.overlays, pa.concat_tables([entries, tombstones])))
        return KeyIndex(snapshot_id, self.key_schema, chains, self._io, self.cache)

    def _looked_up(self, added: pa.Table | None, replaced: pa.Table | None) -> pa.Table:
        """A partition's overlay after a batch whose lookup found ``replaced``: its added
        entries, and the keys it deleted that it did not add again as deleted."""
        names, schema = self.key_columns, _entry_schema(self.key_schema)
        entries = _as_entries(added, self.key_schema) if added is not None else schema.empty_table()
        gone = (
            replaced.select(names).cast(self.key_schema)
            if replaced is not None
            else self.key_schema.empty_table()
        )
        missing = _anti_join(_distinct(gone, names), entries.select(names), names)
        tombstones = pa.table(
            [
                *missing.columns,
                pa.nulls(missing.num_rows, pa.string()),
                pa.nulls(missing.num_rows, pa.int64()),
            ],
            schema=schema,
        )
        return pa.concat_tables([entries, tombstones])

    def merged(
        self, partition: Partition, keep_deleted: bool, links: Sequence[pa.Table] | None = None
    ) -> pa.Table:
        """The newest entries of each key of ``links`` (default: the partition's), deleted keys or not."""
        names, seen, found = self.key_columns, None, []
        for link in reversed(list(self.links(partition) if links is None else links)):
            rows = link if seen is None else _anti_join(link, seen, names)
            found.append(_as_entries(rows, self.key_schema))
            keys = rows.select(names)
            seen = keys if seen is None else pa.concat_tables([seen, keys])
        table = _concat(found, self.key_schema)
        return table if keep_deleted else table.filter(pc.is_valid(table.column("file_path")))

    def blobs(
        self, registered: Iterable[str], max_links: int = DEFAULT_MAX_LINKS
    ) -> tuple[list[bytes], dict[Partition, list[BlobRef | int]], dict[int, pa.Table]]:
        """The blobs a file for this view must hold, every partition's chain (its own blobs by
        number) and the entries of each new blob (to keep decoded)."""
        known = set(registered)
        blobs: list[bytes] = []
        tables: dict[int, pa.Table] = {}
        chains: dict[Partition, list[BlobRef | int]] = {}
        for partition, chain in self.chains.items():
            stale = any(ref.path not in known for ref in chain.refs)
            if not chain.overlays and not stale:
                chains[partition] = list(chain.refs)
                continue
            full = not chain.refs or stale or len(chain.refs) + 1 > max_links
            entries = (
                self.merged(partition, keep_deleted=False)
                if full
                else self.merged(partition, keep_deleted=True, links=chain.overlays)
            )
            if full and entries.num_rows == 0:
                continue  # the partition holds no key any more
            tables[len(blobs)] = entries
            blobs.append(encode_blob(entries, self.key_columns))
            chains[partition] = [len(blobs) - 1] if full else [*chain.refs, len(blobs) - 1]
        return blobs, chains, tables

    def written(self, snapshot_id: int | None, chains: dict[Partition, tuple[BlobRef, ...]]) -> KeyIndex:
        """This view once written with these chains (no overlays left)."""
        return KeyIndex(
            snapshot_id, self.key_schema, {p: Chain(c) for p, c in chains.items()}, self._io, self.cache
        )


def _entry_schema(key_schema: pa.Schema) -> pa.Schema:
    return pa.schema([*key_schema, pa.field("file_path", pa.string()), pa.field("pos", pa.int64())])


def _as_entries(rows: pa.Table, key_schema: pa.Schema) -> pa.Table:
    """``rows`` with a plain string ``file_path``, in the entry schema."""
    return pa.table(
        [
            *(rows.column(n) for n in key_schema.names),
            rows.column("file_path").cast(pa.string()),
            rows.column("pos").cast(pa.int64()),
        ],
        schema=_entry_schema(key_schema),
    )


def _concat(tables: list[pa.Table], key_schema: pa.Schema) -> pa.Table:
    schema = key_schema if tables and tables[0].num_columns == len(key_schema) else _entry_schema(key_schema)
    return pa.concat_tables(tables) if tables else schema.empty_table()


def _distinct(keys: pa.Table, names: list[str]) -> pa.Table:
    return keys.group_by(names, use_threads=False).aggregate([]).select(names)


def _at(link: pa.Table, removed: set[str], deleted: pa.Table | None) -> pa.Table:
    """Rows of ``link`` in a removed file or at a deleted position."""
    if link.num_rows == 0 or (not removed and (deleted is None or deleted.num_rows == 0)):
        return link.slice(0, 0)
    return link.filter(_at_mask(link, removed, deleted))


def _at_mask(link: pa.Table, removed: set[str], deleted: pa.Table | None) -> pa.Array:
    """Which rows of ``link`` are in a removed file or at a deleted position.

    Compared as numbers (the file's ordinal in the link's dictionary, shifted, plus the
    position), never as strings: a full blob has a row per key of its partition.
    """
    paths = link.column("file_path").combine_chunks()
    if not pa.types.is_dictionary(paths.type):
        paths = paths.cast(pa.string()).dictionary_encode()  # an overlay: few rows
    files, ordinals = paths.dictionary, paths.indices
    mask = pc.take(pc.is_in(files, value_set=pa.array(sorted(removed), pa.string())), ordinals)
    if deleted is not None and deleted.num_rows:
        wanted = pc.index_in(deleted.column("file_path").combine_chunks().cast(pa.string()), value_set=files)
        codes = _codes(wanted, deleted.column("pos").combine_chunks()).drop_null()
        at_deleted = pc.is_in(_codes(ordinals, link.column("pos").combine_chunks()), value_set=codes)
        mask = pc.or_(pc.fill_null(mask, False), pc.fill_null(at_deleted, False))
    return pc.fill_null(mask, False)


def _codes(ordinals: pa.Array, positions: pa.Array) -> pa.Array:
    """A (file ordinal, position) pair as one number."""
    return pc.add(pc.shift_left(ordinals.cast(pa.int64()), _POSITION_BITS), positions.cast(pa.int64()))


def _semi_join(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Table:
    """Rows of ``rows`` whose ``names`` columns are a row of ``keys``."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return rows.slice(0, 0)
    return rows.filter(_member(rows, keys, names))


def _anti_join(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Table:
    """Rows of ``rows`` whose ``names`` columns are no row of ``keys``."""
    if rows.num_rows == 0 or keys.num_rows == 0:
        return rows
    return rows.filter(pc.invert(_member(rows, keys, names)))


def _member(rows: pa.Table, keys: pa.Table, names: list[str]) -> pa.Array:
    """Which rows of ``rows`` have ``names`` columns equal to a row of ``keys``.

    Joined on the named columns and a row number only: the other columns (a dictionary
    ``file_path``) never enter the join.
    """
    if len(names) == 1:
        values = keys.column(names[0]).combine_chunks()
        return pc.fill_null(pc.is_in(rows.column(names[0]).combine_chunks(), value_set=values), False)
    numbered = rows.select(names).append_column("__row", pa.array(range(rows.num_rows), pa.int64()))
    wanted = _distinct(keys.select(names), names)
    matched = numbered.join(wanted, keys=names, join_type="left semi", use_threads=False).column("__row")
    mask = pa.array([False] * rows.num_rows, pa.bool_()).to_numpy(zero_copy_only=False)
    mask[matched.to_numpy()] = True
    return pa.array(mask)
