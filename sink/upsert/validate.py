"""Conflict check of a row delta: did a concurrent commit touch the data files its deletes point at?

A batch's position deletes were found in the snapshot its lookup planned from. Before
they are committed on top of a newer snapshot, every snapshot committed since is read
(only the manifests that snapshot wrote) for

- a referenced data file marked deleted (a compaction or another writer's rewrite
  removed it: the rows the deletes point at may now live in another file), or
- a position delete file added for a referenced data file (another upsert changed rows
  of the same file, maybe the same keys: file-level, as Iceberg Java's check).

Snapshots whose operation is ``append`` add data files only and are skipped: a plain
append of other files is not a conflict.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot

from sink.write.position_deletes import FILE_PATH_FIELD_ID


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
