"""Conflict checks of a row delta against the commits made since its lookup's snapshot.

A batch's position deletes were found in the snapshot its lookup planned from. Before
they are committed on top of a newer snapshot, every snapshot committed since is read
(only the manifests that snapshot wrote) for

- a referenced data file marked deleted (a compaction or another writer's rewrite
  removed it: the rows the deletes point at may now live in another file), or
- a position delete file added for a referenced data file (another upsert changed rows
  of the same file, maybe the same keys: file-level, as Iceberg Java's check)

(:func:`conflicting_data_files`; snapshots whose operation is ``append`` add data files
only and are skipped there), and for

- a data file added holding a row of one of the batch's keys (another upserting sink,
  an appending one, another engine): the lookup did not see that row, so committing
  would store the key twice (:class:`ConcurrentKeys`). Every snapshot but a ``replace``
  is read: a plain append of other files counts as much as another upsert. A
  ``replace`` (compaction) moves rows without changing them: the rows it moved were
  live in the files it removed, which the first check covers.

Cost per batch on a table that others commit to: one manifest list per snapshot
committed since the lookup's, the manifests those snapshots wrote (cached across the
commit's attempts), and, for each data file they added whose partition and key-column
bounds admit one of the batch's keys (:class:`~sink.upsert.candidates.KeyCandidates`),
one read of the file's key columns, skipping row groups whose statistics exclude every
key (:func:`~sink.upsert.lookup.find_rows`). A file whose bounds exclude every key is
never opened; each file is read at most once per batch. Nothing is read when no other
writer committed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from sink.upsert.candidates import KeyCandidates
from sink.upsert.lookup import find_rows
from sink.upsert.messages import LookupTask
from sink.write.position_deletes import FILE_PATH_FIELD_ID

logger = logging.getLogger(__name__)


def snapshots_since(metadata: TableMetadata, start_snapshot_id: int | None) -> list[Snapshot] | None:
    """Snapshots of the main branch committed after ``start_snapshot_id``, oldest first.

    ``None`` when the start snapshot is not an ancestor of the current one any more
    (rolled back or expired away): nothing can then be proven.
    """
    found: list[Snapshot] = []
    snapshot = metadata.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != start_snapshot_id:
        found.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = metadata.snapshot_by_id(parent) if parent is not None else None
        if parent is not None and snapshot is None:
            return None  # history expired before reaching the start
    if snapshot is None and start_snapshot_id is not None:
        return None
    return list(reversed(found))


def conflicting_data_files(
    metadata: TableMetadata, io: FileIO, start_snapshot_id: int | None, referenced: Iterable[str]
) -> set[str]:
    """The referenced data files that commits after ``start_snapshot_id`` removed or added deletes to.

    Every referenced file is returned when the history since the start is not known.
    """
    wanted = set(referenced)
    if not wanted:
        return set()
    snapshots = snapshots_since(metadata, start_snapshot_id)
    if snapshots is None:
        return wanted
    found: set[str] = set()
    for snapshot in snapshots:
        if snapshot.summary is not None and snapshot.summary.operation == Operation.APPEND:
            continue
        for manifest in snapshot.manifests(io):
            if manifest.added_snapshot_id != snapshot.snapshot_id:
                continue  # carried over unchanged from an earlier snapshot
            entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            own = [e for e in entries if e.snapshot_id == snapshot.snapshot_id]
            if manifest.content == ManifestContent.DATA:
                found |= {
                    e.data_file.file_path
                    for e in own
                    if e.status == ManifestEntryStatus.DELETED and e.data_file.file_path in wanted
                }
            else:
                found |= {
                    path for e in own if e.status == ManifestEntryStatus.ADDED for path in _targets(e, wanted)
                }
    return found


def _targets(entry: ManifestEntry, wanted: set[str]) -> set[str]:
    """The wanted data files a new delete file may apply to (by its ``file_path`` bounds)."""
    data_file = entry.data_file
    if data_file.content != DataFileContent.POSITION_DELETES:
        return set(wanted)  # an equality delete may match any row
    lower = (data_file.lower_bounds or {}).get(FILE_PATH_FIELD_ID)
    upper = (data_file.upper_bounds or {}).get(FILE_PATH_FIELD_ID)
    if lower is None or upper is None:
        return set(wanted)
    low, high = lower.decode(), upper.decode()
    return {path for path in wanted if low <= path <= high}


@dataclass(frozen=True)
class KeyCheck:
    """What :meth:`ConcurrentKeys.check` found in the commits made since a lookup's snapshot.

    Attributes:
        snapshots: Snapshots committed since (``replace`` ones included, not read).
        files_added: Data files they added (rewrites left out).
        files_read: Of those, files whose partition and key bounds admit a key: their key
            columns were read (files read for an earlier attempt of the batch included).
        files: The added data files holding a row of one of the batch's keys.
        history_lost: The lookup's snapshot is no longer an ancestor of the current one
            (rolled back or expired): nothing can be proven, the lookup must be redone.
    """

    snapshots: int = 0
    files_added: int = 0
    files_read: int = 0
    files: tuple[str, ...] = ()
    history_lost: bool = False

    @property
    def files_with_keys(self) -> int:
        return len(self.files)

    @property
    def conflict(self) -> bool:
        """Whether the batch's lookup must be redone on the current snapshot."""
        return self.history_lost or bool(self.files)


class ConcurrentKeys:
    """Finds rows of one batch's keys in the data files committed after its lookup's snapshot.

    Data files and manifests never change once written: what was read is kept for the
    batch's later attempts.

    Args:
        io: The table's file system.
        key_columns: The key columns.
        keys: The batch's keys (the key columns; a row per key).
    """

    def __init__(self, io: FileIO, key_columns: Sequence[str], keys: pa.Table) -> None:
        self._io = io
        self._key_columns = tuple(key_columns)
        self._keys = keys
        self._entries: dict[str, list[ManifestEntry]] = {}  # manifest path -> its entries
        self._holds: dict[str, bool] = {}  # data file path -> holds one of the keys

    def check(self, metadata: TableMetadata, start_snapshot_id: int | None) -> KeyCheck:
        """The data files committed to ``metadata``'s table after ``start_snapshot_id`` holding a key."""
        if self._keys.num_rows == 0:
            return KeyCheck()
        snapshots = snapshots_since(metadata, start_snapshot_id)
        if snapshots is None:
            return KeyCheck(history_lost=True)
        if not snapshots:
            return KeyCheck()
        candidates = KeyCandidates.of(metadata, self._key_columns, self._keys)
        added = read = 0
        found: list[str] = []
        for snapshot in snapshots:
            for data_file in self._added_data_files(snapshot):
                added += 1
                subset = candidates.for_data_file(data_file)
                if subset.num_rows == 0:
                    continue  # its partition or its key bounds exclude every key: not opened
                read += 1
                if self._holds_any(data_file, candidates.key_ids, subset):
                    found.append(data_file.file_path)
        return KeyCheck(len(snapshots), added, read, tuple(found))

    def _added_data_files(self, snapshot: Snapshot) -> Iterator[DataFile]:
        if snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE:
            return  # rows moved, none changed: covered by the check of removed files
        for manifest in snapshot.manifests(self._io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                continue  # carried over from an earlier snapshot, or deletes
            for entry in self._manifest_entries(manifest):
                if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.ADDED:
                    yield entry.data_file

    def _manifest_entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        entries = self._entries.get(manifest.manifest_path)
        if entries is None:
            entries = self._entries[manifest.manifest_path] = manifest.fetch_manifest_entry(
                self._io, discard_deleted=False
            )
        return entries

    def _holds_any(self, data_file: DataFile, key_ids: tuple[int, ...], keys: pa.Table) -> bool:
        """Whether ``data_file`` has a row of one of ``keys`` (rows deleted since count too)."""
        path = data_file.file_path
        if path not in self._holds:
            task = LookupTask(
                index=0,
                data_file=path,
                spec_id=data_file.spec_id,
                partition=tuple(data_file.partition[i] for i in range(len(data_file.partition))),
                record_count=data_file.record_count,
                key_field_ids=key_ids,
                keys=keys,
            )
            rows, _ = find_rows(task, self._io)
            self._holds[path] = rows.num_rows > 0
        return self._holds[path]
