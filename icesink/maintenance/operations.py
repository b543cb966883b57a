"""Table maintenance for long-running streams: expire snapshots, delete orphaned files, compact.

Both keep the replay check intact: the ledger's marker is a table property, which
snapshot expiration does not touch, so a batch replayed after its snapshot has been
expired is still recognised (see :mod:`icesink.commit.ledger`).

The sink runs them itself after its commits (``maintenance.*``, :mod:`icesink.maintenance.scheduler`);
run them from any process too, e.g. a daily job::

    from icesink.maintenance import expire_snapshots, remove_orphan_files
    expire_snapshots(table, retain_last=10)
    remove_orphan_files(table, older_than=timedelta(days=1))
    compact(table)  # upserted tables: small files and position deletes rewritten
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyiceberg.avro.file import AvroFile
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icesink import failpoints
from icesink._pyiceberg import list_files_with_mtime
from icesink.errors import RewriteConflictError
from icesink.maintenance.index_files import orphaned_index_files, unused_index_files
from icesink.maintenance.planning import live_files
from icesink.upsert.compaction import DEFAULT_TARGET_FILE_SIZE_BYTES, CompactionResult, compact_partition

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
    expired_ids = set(expired)
    gone = [s for s in snapshots if s.snapshot_id in expired_ids]
    statistics = [s for s in table.metadata.statistics if s.snapshot_id in expired_ids]
    table.maintenance.expire_snapshots().by_ids(expired).commit()
    deleted: list[str] = []
    if delete_files:
        table.refresh()
        unused = unused_index_files(table, [s.statistics_path for s in statistics])
        for path in sorted(_only_reached_by(table, gone, table.snapshots()) | unused):
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


def _only_reached_by(table: Table, gone: list[Snapshot], kept: list[Snapshot]) -> set[str]:
    """Files the ``gone`` snapshots reached and no ``kept`` snapshot reaches.

    Their manifest lists, their manifests that no kept snapshot lists, and the data and
    delete files of those manifests that no kept manifest has an entry for (deleted
    entries count, as for :func:`referenced_files`). Only the candidates are held, not
    every file of the table: a stream's table keeps growing, and the driver must not.
    """
    kept_manifests = {m.manifest_path: m for s in kept for m in s.manifests(table.io)}
    gone_manifests = {
        m.manifest_path: m
        for s in gone
        for m in s.manifests(table.io)
        if m.manifest_path not in kept_manifests
    }
    files = {path for manifest in gone_manifests.values() for path in _file_paths(table.io, manifest)}
    for manifest in kept_manifests.values():
        if not files:
            break
        files.difference_update(_file_paths(table.io, manifest))
    return {s.manifest_list for s in gone} | set(gone_manifests) | files


def _file_paths(io: FileIO, manifest: ManifestFile) -> Iterator[str]:
    """The file path of every entry of ``manifest``, deleted ones too, read one entry at a time.

    ``fetch_manifest_entry`` builds all entries of a manifest at once, statistics and all;
    a merged manifest of a long stream has tens of thousands, and the driver's allocators
    keep what building them took.
    """
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        for entry in reader:
            yield entry.data_file.file_path


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
            paths.update(_file_paths(table.io, manifest))
    return paths | manifests


def remove_orphan_files(
    table: Table,
    older_than: dt.timedelta = DEFAULT_ORPHAN_AGE,
    dry_run: bool = False,
    keep: Callable[[str], bool] | None = None,
) -> MaintenanceReport:
    """Delete files under the table's data folder that no snapshot references, and upsert key
    index files in its metadata folder that no registered index names.

    Only files older than ``older_than`` are considered, so files of a batch that is
    being written right now (not yet committed) are never touched; nor are the files
    ``keep`` says are still wanted (a sink's staged batches and attempts in flight).
    """
    data_location = table.metadata.properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
    referenced = referenced_files(table)
    cutoff = dt.datetime.now(dt.UTC) - older_than
    orphans = []
    for path, modified in _files_with_mtime(table, data_location):
        if path not in referenced and modified < cutoff and not (keep is not None and keep(path)):
            orphans.append(path)
    metadata_files = _files_with_mtime(table, f"{table.location().rstrip('/')}/metadata")
    orphans += orphaned_index_files(table, [path for path, modified in metadata_files if modified < cutoff])
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


@dataclass(frozen=True)
class CompactionReport:
    """What :func:`compact` did.

    Attributes:
        partitions: Partitions compacted (one ``replace`` snapshot each).
        rewritten_data_files: Old data files removed.
        removed_delete_files: Delete files removed.
        added_data_files: New data files.
        rows: Live rows rewritten.
        given_up: Partitions left as they were because a concurrent commit changed them.
    """

    partitions: int = 0
    rewritten_data_files: int = 0
    removed_delete_files: int = 0
    added_data_files: int = 0
    rows: int = 0
    given_up: tuple[tuple[Any, ...], ...] = ()


def compact(
    table: Table,
    target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
    min_files: int = 2,
    partitions: Iterable[tuple[Any, ...]] | None = None,
    min_delete_files: int = 1,
) -> CompactionReport:
    """Rewrite partitions' data files with their position deletes applied.

    See :mod:`icesink.upsert.compaction`.

    Safe while a stream writes: a partition whose files a concurrent commit changed is
    left as it was (reported in ``given_up``; run again later), never half rewritten.

    Args:
        table: The table (format v2).
        target_file_size_bytes: Size at which the new files roll.
        min_files: A partition is compacted when it has ``min_delete_files`` delete files
            or at least this many data files smaller than the target.
        partitions: The partitions (values in spec order, e.g. ``(3,)``); default:
            every partition of the default spec that qualifies.
    """
    todo = (
        list(partitions)
        if partitions is not None
        else partitions_to_compact(table, target_file_size_bytes, min_files, min_delete_files)
    )
    results: list[CompactionResult] = []
    given_up: list[tuple[Any, ...]] = []
    for partition in todo:
        try:
            results.append(compact_partition(table, partition, target_file_size_bytes, min_files))
        except RewriteConflictError as e:
            logger.warning("compaction of partition %s of %s given up: %s", partition, table.name(), e)
            given_up.append(partition)
    done = [r for r in results if r.snapshot_id is not None]
    return CompactionReport(
        len(done),
        sum(r.rewritten_data_files for r in done),
        sum(r.removed_delete_files for r in done),
        sum(r.added_data_files for r in done),
        sum(r.rows for r in done),
        tuple(given_up),
    )


def partitions_to_compact(
    table: Table, target_file_size_bytes: int, min_files: int, min_delete_files: int = 1
) -> list[tuple[Any, ...]]:
    """Partitions of the default spec with ``min_delete_files`` delete files or ``min_files`` small files.

    Most delete files first: they cost readers most.
    """
    snapshot = table.current_snapshot()
    if snapshot is None:
        return []
    small: Counter[tuple[Any, ...]] = Counter()
    deletes: Counter[tuple[Any, ...]] = Counter()
    for values, file in live_files(table, snapshot):
        if file.content != DataFileContent.DATA:
            deletes[values] += 1
        elif file.file_size_in_bytes < target_file_size_bytes:
            small[values] += 1
    chosen = {p for p, n in deletes.items() if n >= min_delete_files} | {
        p for p, n in small.items() if n >= min_files
    }
    return sorted(chosen, key=lambda p: (-deletes[p], -small[p], repr(p)))
