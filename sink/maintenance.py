"""Table maintenance for long-running streams: expire snapshots, delete orphaned files.

Both keep the replay check intact: the ledger's marker is a table property, which
snapshot expiration does not touch, so a batch replayed after its snapshot has been
expired is still recognised (see :mod:`sink.commit.ledger`).

Run them from any process, e.g. a daily job::

    from sink.maintenance import expire_snapshots, remove_orphan_files
    expire_snapshots(table, retain_last=10)
    remove_orphan_files(table, older_than=timedelta(days=1))
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from dataclasses import dataclass

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from sink import failpoints
from sink._pyiceberg import list_files_with_mtime

logger = logging.getLogger(__name__)

DEFAULT_ORPHAN_AGE = dt.timedelta(days=1)


@dataclass(frozen=True)
class MaintenanceReport:
    """What a maintenance call did."""

    expired_snapshots: int = 0
    deleted_files: tuple[str, ...] = ()


def expire_snapshots(
    table: Table, retain_last: int = 1, older_than: dt.datetime | None = None, delete_files: bool = True
) -> MaintenanceReport:
    """Expire all but the newest ``retain_last`` snapshots (and only those older than ``older_than``).

    Snapshots that are branch or tag heads are never expired. With ``delete_files``,
    the manifest lists, manifests and data files that only the expired snapshots
    reached are deleted: everything still reachable from a remaining snapshot is kept.
    """
    if retain_last < 1:
        raise ValueError(f"retain_last={retain_last}: at least the current snapshot must be kept")
    snapshots = sorted(table.snapshots(), key=lambda s: s.timestamp_ms, reverse=True)
    protected = {ref.snapshot_id for ref in table.metadata.refs.values()}
    cutoff = older_than.timestamp() * 1000 if older_than else float("inf")
    expired = [
        s.snapshot_id
        for s in snapshots[retain_last:]
        if s.snapshot_id not in protected and s.timestamp_ms < cutoff
    ]
    if not expired:
        return MaintenanceReport()
    before = _reachable(table, table.snapshots()) if delete_files else set()
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    deleted: list[str] = []
    if delete_files:
        table.refresh()
        for path in sorted(before - _reachable(table, table.snapshots())):
            with contextlib.suppress(FileNotFoundError):
                table.io.delete(path)
            deleted.append(path)
    logger.info(
        "expired %s snapshots of %s, deleted %s files only they reached",
        len(expired),
        ".".join(table.name()),
        len(deleted),
    )
    return MaintenanceReport(expired_snapshots=len(expired), deleted_files=tuple(deleted))


def referenced_files(table: Table) -> set[str]:
    """Every file (data, delete, manifest, manifest list) a remaining snapshot references."""
    return _reachable(table, table.snapshots())


def _reachable(table: Table, snapshots: list[Snapshot]) -> set[str]:
    """Manifest lists, manifests and data/delete files reachable from ``snapshots``."""
    paths: set[str] = set()
    manifests: set[str] = set()
    for snapshot in snapshots:
        paths.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in manifests:
                continue
            manifests.add(manifest.manifest_path)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                paths.add(entry.data_file.file_path)
    return paths | manifests


def remove_orphan_files(
    table: Table, older_than: dt.timedelta = DEFAULT_ORPHAN_AGE, dry_run: bool = False
) -> MaintenanceReport:
    """Delete files under the table's data folder that no snapshot references.

    Only files older than ``older_than`` are considered, so files of a batch that is
    being written right now (not yet committed) are never touched.
    """
    data_location = table.metadata.properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
    referenced = referenced_files(table)
    cutoff = dt.datetime.now(dt.UTC) - older_than
    orphans = []
    for path, modified in _files_with_mtime(table, data_location):
        if path not in referenced and modified < cutoff:
            orphans.append(path)
    if not dry_run:
        failpoints.hit("maintenance")
        for path in orphans:
            table.io.delete(path)
    logger.info(
        "%s %s orphan files of %s (older than %s)",
        "found" if dry_run else "deleted",
        len(orphans),
        ".".join(table.name()),
        older_than,
    )
    return MaintenanceReport(deleted_files=tuple(orphans))


def _files_with_mtime(table: Table, location: str) -> list[tuple[str, dt.datetime]]:
    now = dt.datetime.now(dt.UTC)
    result = []
    for path, mtime in list_files_with_mtime(table.io, location):
        if mtime is None:
            result.append((path, now))  # unknown age: treat as new, never delete
        else:
            result.append((path, mtime if mtime.tzinfo else mtime.replace(tzinfo=dt.UTC)))
    return result
