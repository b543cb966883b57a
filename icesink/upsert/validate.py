"""Conflict checks of a row delta against the commits made since its lookup's snapshot.

A batch's position deletes were found in the snapshot its lookup planned from. Before
they are committed on top of a newer snapshot, every snapshot committed since is read
(only the manifests that snapshot wrote) for

- a referenced data file marked deleted (a compaction or another writer's rewrite
  removed it: the rows the deletes point at may now live in another file), or
- a position delete file added for a referenced data file (another upsert changed rows
  of the same file, maybe the same keys: file-level, as Iceberg Java's check)

(:func:`conflicting_data_files`; snapshots whose operation is ``append`` add data files
only and are skipped there; the delete files a ``replace`` adds restate deletes already
committed, merged into fewer files (:mod:`icesink.upsert.delete_merge`), and are not
conflicts), and for

- a data file added holding a row of one of the batch's keys (another upserting sink,
  an appending one, another engine): the lookup did not see that row, so committing
  would store the key twice (:class:`ConcurrentKeys`). Every snapshot but a ``replace``
  is read: a plain append of other files counts as much as another upsert. A
  ``replace`` (compaction) moves rows without changing them: the rows it moved were
  live in the files it removed, which the first check covers.

Cost per batch on a table that others commit to: one manifest list per snapshot
committed since the lookup's, the manifests those snapshots wrote (cached across the
commit's attempts), and, for each data file they added whose partition and key-column
bounds admit one of the batch's keys (:class:`~icesink.upsert.candidates.KeyCandidates`),
one read of the file's key columns, skipping row groups whose statistics exclude every
key (:func:`~icesink.upsert.lookup.find_rows`), until one holds a key. A file whose bounds
exclude every key is never opened; each snapshot's manifests and each file are read at
most once per batch (a later attempt only walks the snapshot ids). Nothing is read
when no other writer committed. Measured in :mod:`benchmarks.upsert_key_check`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from icesink.upsert.candidates import KeyCandidates
from icesink.upsert.lookup import find_rows
from icesink.upsert.messages import LookupTask
from icesink.write.position_deletes import FILE_PATH_FIELD_ID

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
        rewrite = snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE
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
            elif not rewrite:
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
        files_added: Data files they added (rewrites left out), up to the first holding a key.
        files_read: Of those, files whose partition and key bounds admit a key: their key
            columns were read (files read for an earlier attempt of the batch included).
        files: The first added data file found holding a row of one of the batch's keys
            (the lookup is redone: the other files need not be read).
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

    Data files and manifests never change once written: what was read, and each file's
    verdict, is kept for the batch's later attempts and lookups.

    Args:
        io: The table's file system.
        key_columns: The key columns.
        keys: The batch's keys (the key columns; a row per key).
    """

    def __init__(self, io: FileIO, key_columns: Sequence[str], keys: pa.Table) -> None:
        self._io = io
        self._key_columns = tuple(key_columns)
        self._keys = keys
        self._added: dict[int, list[DataFile]] = {}  # snapshot id -> the data files it added
        self._verdicts: dict[str, tuple[bool, bool]] = {}  # data file -> (bounds admit a key, holds one)
        self._candidates: KeyCandidates | None = None

    def check(self, metadata: TableMetadata, start_snapshot_id: int | None) -> KeyCheck:
        """The data files committed to ``metadata``'s table after ``start_snapshot_id`` holding a key."""
        if self._keys.num_rows == 0:
            return KeyCheck()
        snapshots = snapshots_since(metadata, start_snapshot_id)
        if snapshots is None:
            return KeyCheck(history_lost=True)
        added = read = 0
        for snapshot in snapshots:
            for data_file in self._added_data_files(snapshot):
                added += 1
                admits, holds = self._verdict(data_file, metadata)
                read += admits
                if holds:  # one file is enough to redo the lookup: the rest need not be read
                    return KeyCheck(len(snapshots), added, read, (data_file.file_path,))
        return KeyCheck(len(snapshots), added, read)

    def _added_data_files(self, snapshot: Snapshot) -> list[DataFile]:
        found = self._added.get(snapshot.snapshot_id)
        if found is not None:
            return found
        found = self._added[snapshot.snapshot_id] = []
        if snapshot.summary is not None and snapshot.summary.operation == Operation.REPLACE:
            return found  # rows moved, none changed: covered by the check of removed files
        for manifest in snapshot.manifests(self._io):
            if manifest.added_snapshot_id != snapshot.snapshot_id or manifest.content != ManifestContent.DATA:
                continue  # carried over from an earlier snapshot, or deletes
            found += [
                entry.data_file
                for entry in manifest.fetch_manifest_entry(self._io, discard_deleted=False)
                if entry.snapshot_id == snapshot.snapshot_id and entry.status == ManifestEntryStatus.ADDED
            ]
        return found

    def _verdict(self, data_file: DataFile, metadata: TableMetadata) -> tuple[bool, bool]:
        """Whether the file's partition and bounds admit a key, and whether it has a row of one.

        Only a file whose bounds admit a key is opened; rows deleted since count too.
        """
        path = data_file.file_path
        verdict = self._verdicts.get(path)
        if verdict is not None:
            return verdict
        if self._candidates is None or data_file.spec_id not in self._candidates.spec_ids:
            self._candidates = KeyCandidates.of(metadata, self._key_columns, self._keys)  # a new spec
        subset = self._candidates.for_data_file(data_file)
        holds = False
        if subset.num_rows:
            task = LookupTask(
                index=0,
                data_file=path,
                spec_id=data_file.spec_id,
                partition=tuple(data_file.partition[i] for i in range(len(data_file.partition))),
                record_count=data_file.record_count,
                key_field_ids=self._candidates.key_ids,
                keys=subset,
            )
            holds = find_rows(task, self._io)[0].num_rows > 0
        verdict = self._verdicts[path] = (subset.num_rows > 0, holds)
        return verdict
