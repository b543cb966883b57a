"""The upsert key index kept up to date: loaded from the table, caught up, or rebuilt from the data files.

:class:`KeyIndexStore` keeps one table's index across batches (:meth:`KeyIndexStore.at`):

1. the view of the last snapshot it described, kept in memory, or else the index file of
   the newest ancestor of the current snapshot that has one (its statistics file);
2. caught up from what every snapshot committed since added or removed (read from the
   manifests those snapshots wrote): the key columns of the data files added, the data
   files removed (a compaction by icesink or Iceberg Java: the rewritten files come back as
   added), the positions of the position delete files added (other writers' deletes), but
   not those a ``replace`` adds: they merge positions already deleted, at no cost to the index.
   The same catch-up covers icesink's own batches when their commit could not carry the
   index (another writer committed first);
3. rebuilt from the current snapshot's data files and position deletes when there is
   none, when it cannot be read (a corrupt or missing blob: logged, counted, rebuilt: the
   batch does not fail), when it is of a format version this one does not know, or when
   the history since its snapshot is gone (rolled back or expired).

What a batch's own commit changes is a step too (:meth:`KeyIndexStore.step_of_files`):
its new data files' key columns and its delete files' positions, read back after the
write, so the write tasks need not know the positions they wrote.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntryStatus
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from icesink.config_upsert import UpsertConfig
from icesink.errors import UpsertError
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.upsert.deleted_positions import positions_by_data_file
from icesink.upsert.key_index import IndexFormatError, Partition, is_index_path, read_footer
from icesink.upsert.key_index_entries import key_entries
from icesink.upsert.key_index_view import Chain, IndexStep, KeyIndex, LinkCache
from icesink.upsert.lookup import columns_by_field_id
from icesink.upsert.validate import snapshots_since
from icesink.write.messages import DataFileMessage, decode_keys

logger = logging.getLogger(__name__)

# Data and delete files read at once by a rebuild or a catch-up.
READ_THREADS = 8


@dataclass
class IndexCounts:
    """What a store did since they were last taken: blob entries read, rebuilds, catch-up files read."""

    entries_read: int = 0
    rebuilds: int = 0
    catchup_files: int = 0


class KeyIndexStore:
    """One table's key index across batches (see the module).

    Args:
        file_io: The table's file system.
        key_columns: The key columns.
        table_name: For log lines.
        cache_bytes: Most bytes of decoded blobs kept in memory.
    """

    def __init__(
        self, file_io: FileIO, key_columns: Sequence[str], table_name: str, cache_bytes: int
    ) -> None:
        self.io = file_io
        self._key_columns = tuple(key_columns)
        self._name = table_name
        self._cache = LinkCache(cache_bytes)
        self._view: KeyIndex | None = None
        self._counts = IndexCounts()
        self._entries_taken = 0
        self._field_ids: tuple[int, ...] = ()
        self._key_schema = pa.schema([])

    def take_counts(self) -> IndexCounts:
        """What was done since the last call."""
        counts, self._counts = self._counts, IndexCounts()
        counts.entries_read = self._cache.entries_read - self._entries_taken
        self._entries_taken = self._cache.entries_read
        return counts

    def keep(self, view: KeyIndex) -> None:
        """Remember ``view`` (a committed snapshot's) for the next batch."""
        self._view = view

    def forget(self) -> None:
        """Load the index from the table next time (its view in memory may be wrong)."""
        self._view = None

    def at(self, metadata: TableMetadata) -> KeyIndex:
        """The index of the table's current snapshot (see the module)."""
        key_schema = self._schema_of(metadata)
        view = self._view if self._view is not None and self._view.key_schema.equals(key_schema) else None
        reason = "missing"
        try:
            if view is None:
                view = self._load(metadata, key_schema)
            if view is not None:
                since = snapshots_since(metadata, view.snapshot_id)
                if since is None:
                    view, reason = None, "history_lost"
                elif since:
                    view = view.apply(self.step_of_snapshots(since), metadata.current_snapshot_id)
        except IndexFormatError as e:
            logger.warning("key index of %s unreadable, rebuilding it from the data files: %s", self._name, e)
            view, reason = None, "unreadable"
        if view is None:
            view = self.rebuild(metadata, key_schema, reason)
        self._view = view
        return view

    def rebuilt(self, metadata: TableMetadata) -> KeyIndex:
        """The index of the current snapshot rebuilt from the data files (a blob could not be read)."""
        self._view = self.rebuild(metadata, self._schema_of(metadata), "unreadable")
        return self._view

    def _load(self, metadata: TableMetadata, key_schema: pa.Schema) -> KeyIndex | None:
        """The index file of the newest ancestor of the current snapshot that has one."""
        files = {s.snapshot_id: s for s in metadata.statistics if is_index_path(s.statistics_path)}
        snapshot = metadata.current_snapshot()
        while snapshot is not None and snapshot.snapshot_id not in files:
            parent = snapshot.parent_snapshot_id
            snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        if snapshot is None:
            return None
        found = files[snapshot.snapshot_id]
        footer = read_footer(self.io, found.statistics_path, found.file_size_in_bytes)
        if footer.key_columns != self._key_columns:
            logger.info("key index of %s is of keys %s; rebuilding it", self._name, footer.key_columns)
            return None
        chains = {p: Chain(refs) for p, refs in footer.chains.items()}
        return KeyIndex(snapshot.snapshot_id, key_schema, chains, self.io, self._cache)

    def rebuild(self, metadata: TableMetadata, key_schema: pa.Schema, reason: str) -> KeyIndex:
        """The index of the current snapshot, from its data files and position deletes."""
        empty = KeyIndex(None, key_schema, {}, self.io, self._cache)
        snapshot = metadata.current_snapshot()
        if snapshot is None:
            return empty
        self._counts.rebuilds += 1
        manifests = snapshot.manifests(self.io)
        deletes = DeleteFileIndex()
        data: list[tuple[DataFile, list[str]]] = []
        for manifest in (m for m in manifests if m.content == ManifestContent.DELETES):
            for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True):
                _refuse_equality_deletes(entry.data_file)
                deletes.add_delete_file(entry, partition_key=entry.data_file.partition)
        for manifest in (m for m in manifests if m.content == ManifestContent.DATA):
            for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=True):
                applying = deletes.for_data_file(
                    entry.sequence_number or 0, entry.data_file, entry.data_file.partition
                )
                data.append((entry.data_file, sorted(d.file_path for d in applying)))
        step = IndexStep()
        positions = self._positions({path for _, paths in data for path in paths})
        entries = self._read_entries(metadata, [f for f, _ in data])
        for (data_file, delete_paths), rows in zip(data, entries, strict=True):
            gone = [positions[p].get(data_file.file_path) for p in delete_paths]
            gone_positions = pa.chunked_array([g for g in gone if g is not None], pa.int64())
            if len(gone_positions):
                rows = rows.filter(  # noqa: PLW2901
                    pc.invert(pc.is_in(rows.column("pos"), value_set=gone_positions.combine_chunks()))
                )
            _add(step.added, _partition(data_file), rows)
        logger.info(
            "key index of %s rebuilt (%s) at snapshot %s from %s data files",
            self._name,
            reason,
            snapshot.snapshot_id,
            len(data),
        )
        return empty.apply(step, snapshot.snapshot_id)

    def step_of_snapshots(self, snapshots: Sequence[Snapshot]) -> IndexStep:
        """What ``snapshots`` added and removed (only the manifests each wrote are read)."""
        added: list[DataFile] = []
        removed: list[DataFile] = []
        delete_files: list[DataFile] = []
        for snapshot in snapshots:
            # A replace's delete files merge positions already deleted (icesink.upsert.delete_merge).
            merged = snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE
            for manifest in snapshot.manifests(self.io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in manifest.fetch_manifest_entry(self.io, discard_deleted=False):
                    if entry.snapshot_id != snapshot.snapshot_id:
                        continue
                    data_file = entry.data_file
                    _refuse_equality_deletes(data_file)
                    if data_file.content == DataFileContent.DATA:
                        if entry.status == ManifestEntryStatus.ADDED:
                            added.append(data_file)
                        elif entry.status == ManifestEntryStatus.DELETED:
                            removed.append(data_file)
                    elif entry.status == ManifestEntryStatus.ADDED and not merged:
                        delete_files.append(data_file)
        self._counts.catchup_files += len(added) + len(delete_files)
        step = IndexStep()
        for data_file, rows in zip(
            added, self._read_entries_of_paths([f.file_path for f in added]), strict=True
        ):
            _add(step.added, _partition(data_file), rows)
        for data_file in removed:
            step.removed.setdefault(_partition(data_file), set()).add(data_file.file_path)
        self._add_deleted(step, [(_partition(f), f.file_path) for f in delete_files])
        return step

    def step_of_files(
        self,
        metadata: TableMetadata,
        data_files: Sequence[DataFileMessage],
        delete_files: Sequence[DataFileMessage],
    ) -> IndexStep:
        """What committing a batch's data files and position delete files to the table changes."""
        self._schema_of(metadata)
        step = IndexStep()
        rows = self._entries_of_messages(data_files)
        for message, entries in zip(data_files, rows, strict=True):
            _add(step.added, (message.spec_id, tuple(message.partition)), entries)
        self._add_deleted(step, [((m.spec_id, tuple(m.partition)), m.path) for m in delete_files])
        return step

    def _add_deleted(self, step: IndexStep, delete_files: list[tuple[Partition, str]]) -> None:
        for (partition, _), rows in zip(
            delete_files, self._read_deletes([p for _, p in delete_files]), strict=True
        ):
            _add(step.deleted, partition, rows)

    def _read_entries(self, metadata: TableMetadata, files: list[DataFile]) -> list[pa.Table]:
        self._schema_of(metadata)
        return self._read_entries_of_paths([f.file_path for f in files])

    def _schema_of(self, metadata: TableMetadata) -> pa.Schema:
        schema = metadata.schema()
        self._field_ids = tuple(schema.find_field(n).field_id for n in self._key_columns)
        self._key_schema = key_arrow_schema(schema, self._key_columns)
        return self._key_schema

    def _entries_of_messages(self, data_files: Sequence[DataFileMessage]) -> list[pa.Table]:
        """Each data file's entries: from the keys its write task sent with its message, else read."""
        unsent = [m.path for m in data_files if not m.keys]
        read = dict(zip(unsent, self._read_entries_of_paths(unsent), strict=True))
        names, schema = self._key_schema.names, self._key_schema
        return [
            key_entries(decode_keys(m.keys).rename_columns(names), m.path, schema) if m.keys else read[m.path]
            for m in data_files
        ]

    def _read_entries_of_paths(self, paths: list[str]) -> list[pa.Table]:
        """Each data file's key columns (by field id), ``file_path`` and ``pos``."""
        field_ids, key_schema = self._field_ids, self._key_schema
        return _in_threads(lambda p: read_data_file_keys(self.io, p, field_ids, key_schema), paths)

    def _read_deletes(self, paths: list[str]) -> list[pa.Table]:
        def read(path: str) -> pa.Table:
            with self.io.new_input(path).open() as stream:
                return pq.read_table(stream, columns=["file_path", "pos"])

        return _in_threads(read, paths)

    def _positions(self, paths: Iterable[str]) -> dict[str, dict[str, pa.Array]]:
        """Each delete file's positions by the data file they refer to."""
        ordered = sorted(paths)
        read = _in_threads(lambda p: positions_by_data_file(self.io, p), ordered)
        return dict(zip(ordered, read, strict=True))


def key_index_store(
    stores: dict[tuple[str, str], KeyIndexStore],
    lock: threading.Lock,
    name: str,
    sink_id: str,
    table: Table,
    upsert: UpsertConfig,
) -> KeyIndexStore | None:
    """The table's key index store, kept across batches (``None``: ``upsert.key-index=false``)."""
    if not upsert.key_index:
        return None
    with lock:
        store = stores.get((name, sink_id))
        if store is None:
            store = stores[(name, sink_id)] = KeyIndexStore(
                table.io, upsert.key_columns, name, upsert.key_index_cache_bytes
            )
        return store


def key_arrow_schema(schema: Schema, key_columns: Sequence[str]) -> pa.Schema:
    """The key columns with the Arrow types of the table's columns."""
    fields = iceberg_to_arrow_schema(Schema(*(schema.find_field(name) for name in key_columns)))
    return pa.schema([pa.field(name, f.type) for name, f in zip(key_columns, fields, strict=True)])


def read_data_file_keys(
    file_io: FileIO, path: str, field_ids: tuple[int, ...], key_schema: pa.Schema
) -> pa.Table:
    """A data file's key columns (found by field id), its path and each row's position."""
    with file_io.new_input(path).open() as stream:
        parquet = pq.ParquetFile(stream)
        try:
            columns = columns_by_field_id(parquet.schema_arrow, field_ids, path)
        except ValueError as e:
            raise UpsertError(str(e)) from e
        names = [parquet.schema_arrow.field(c).name for c in columns]
        keys = parquet.read(columns=names, use_threads=False)
    return key_entries(keys.rename_columns(key_schema.names), path, key_schema)


def _in_threads(read: Callable[[str], pa.Table], paths: list[str]) -> list[pa.Table]:
    if len(paths) <= 1:
        return [read(p) for p in paths]
    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(paths))) as pool:
        return list(pool.map(read, paths))


def _add(tables: dict[Partition, pa.Table], partition: Partition, rows: pa.Table) -> None:
    before = tables.get(partition)
    tables[partition] = rows if before is None else pa.concat_tables([before, rows])


def _partition(data_file: DataFile) -> Partition:
    record = data_file.partition
    return data_file.spec_id, tuple(record[i] for i in range(len(record)))


def _refuse_equality_deletes(data_file: DataFile) -> None:
    if data_file.content == DataFileContent.EQUALITY_DELETES:
        raise UpsertError(
            f"the table has an equality delete file ({data_file.file_path}); "
            "upserts look rows up through position deletes only",
            hint="rewrite the table's data files with their deletes applied (compaction) "
            "before upserting into it",
        )
