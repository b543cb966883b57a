"""What a rewrite of one partition reads and how it commits: shared by compaction and delete merges.

A rewrite (:mod:`icesink.upsert.compaction`, :mod:`icesink.upsert.delete_merge`) plans from the
live files of one partition (:func:`partition_files`) and commits one ``replace`` snapshot
(:func:`commit_rewrite`). Before committing it checks the snapshots committed since it planned
(:func:`~icesink.upsert.validate.conflicting_data_files`): a data file it rewrote that was removed
or got new deletes meanwhile, or a delete file it replaces that is no longer live (the snapshot
producer refuses to remove it), would lose another commit's change. It then gives up cleanly,
deleting what it wrote, with a retryable :class:`~icesink.errors.RewriteConflictError`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFileContent, ManifestEntry
from pyiceberg.table import Table
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.snapshots import Snapshot

from icesink import failpoints
from icesink._pyiceberg import commit_table_updates
from icesink.commit.manifest_entries import live_entries
from icesink.commit.snapshot import SnapshotProducer, require_format_v2
from icesink.errors import RewriteConflictError, UpsertError
from icesink.upsert.validate import conflicting_data_files
from icesink.write.messages import DataFileMessage

# Attempts when the catalog refuses the commit because another writer committed first.
COMMIT_ATTEMPTS = 4


@dataclass
class PartitionFiles:
    """The live files of one partition (default spec) in the snapshot a rewrite planned from.

    Attributes:
        data: Its data files' entries.
        deletes: Its position delete files' entries.
        index: The deletes indexed, to find those applying to a data file.
    """

    data: list[ManifestEntry] = field(default_factory=list)
    deletes: list[ManifestEntry] = field(default_factory=list)
    index: DeleteFileIndex = field(default_factory=DeleteFileIndex)


def rewrite_start(table: Table) -> Snapshot | None:
    """The snapshot a rewrite starts from: ``table`` refreshed (format v2: rewrites commit v2's
    ``replace`` snapshots), its current snapshot; ``None`` for a table without one (nothing to
    rewrite). The commit checks what was committed since it (:func:`commit_rewrite`)."""
    require_format_v2(table)
    table.refresh()
    return table.current_snapshot()


def partition_files(table: Table, partition: tuple[Any, ...]) -> PartitionFiles:
    """Live data and delete entries of ``partition`` in the table's current snapshot (default spec)."""
    return files_by_partition(table, {tuple(partition)}).get(tuple(partition), PartitionFiles())


def files_by_partition(
    table: Table, partitions: Collection[tuple[Any, ...]]
) -> dict[tuple[Any, ...], PartitionFiles]:
    """The live files of each of ``partitions`` that has any, in one pass over the current snapshot."""
    spec_id = table.metadata.default_spec_id
    snapshot = table.current_snapshot()
    found: dict[tuple[Any, ...], PartitionFiles] = {}
    if snapshot is None:
        return found
    for manifest in snapshot.manifests(table.io):
        if manifest.partition_spec_id != spec_id:
            continue
        for entry in live_entries(table.io, manifest):
            values = tuple(entry.data_file.partition[i] for i in range(len(entry.data_file.partition)))
            if values not in partitions:
                continue
            files = found.setdefault(values, PartitionFiles())
            if entry.data_file.content == DataFileContent.DATA:
                files.data.append(entry)
            else:
                files.deletes.append(entry)
                files.index.add_delete_file(entry, partition_key=entry.data_file.partition)
    return found


def commit_rewrite(
    table: Table,
    producer: SnapshotProducer,
    start_id: int,
    rewritten: set[str],
    written: list[DataFileMessage],
) -> int:
    """Validate and commit the rewrite's snapshot; on a conflict delete ``written`` and raise.

    Args:
        table: The table.
        producer: The ``replace`` snapshot, its files added and removed.
        start_id: The snapshot the rewrite planned from.
        rewritten: The data files it rewrote (their rows must not have changed since).
        written: The files it wrote (data and delete files), deleted when it gives up.

    Raises:
        RewriteConflictError: A concurrent commit changed what was rewritten (retryable).
    """
    failpoints.hit("maintenance.commit")
    for attempt in range(COMMIT_ATTEMPTS):
        table.refresh()
        conflicting = conflicting_data_files(table.metadata, table.io, start_id, rewritten)
        try:
            if conflicting:
                raise RewriteConflictError(
                    f"{len(conflicting)} data files being rewritten were removed or got new deletes since "
                    f"snapshot {start_id}: {sorted(conflicting)[:5]}",
                    table=table_name(table),
                    hint="run the compaction again: it plans from the current snapshot",
                )
            pending = producer.build(table.metadata)
        except (RewriteConflictError, UpsertError) as e:
            producer.clean_up()
            delete_written(table, written)
            if isinstance(e, RewriteConflictError):
                raise
            raise RewriteConflictError(str(e), table=table_name(table)) from e
        try:
            commit_table_updates(table, pending.updates, pending.requirements)
        except CommitFailedException:
            time.sleep(0.05 * 2**attempt)
            continue
        producer.clean_up(keep=pending.files)
        return producer.snapshot_id
    producer.clean_up()
    delete_written(table, written)
    raise RewriteConflictError(
        f"commit refused {COMMIT_ATTEMPTS} times by the catalog", table=table_name(table)
    )


def delete_written(table: Table, files: list[DataFileMessage]) -> None:
    """Delete files a rewrite wrote and did not commit."""
    for message in files:
        with contextlib.suppress(FileNotFoundError):
            table.io.delete(message.path)


def table_name(table: Table) -> str:
    return ".".join(table.name())


def by_size(entry: ManifestEntry) -> tuple[int, str]:
    """Sort key of files smallest first (their paths break ties, so the order is stable)."""
    return entry.data_file.file_size_in_bytes, entry.data_file.file_path


def smallest_tier(entries: list[ManifestEntry]) -> list[ManifestEntry]:
    """``entries`` smallest first, as long as each is no bigger than those taken before it (at least
    two): a large file waits until as many bytes came in smaller ones. The delete files a merge
    takes, and the small data files of a partition with delete files; an appended partition's data
    files go by size class (:mod:`icesink.upsert.size_tiers`)."""
    ordered = sorted(entries, key=by_size)
    chosen, size = ordered[:2], sum(e.data_file.file_size_in_bytes for e in ordered[:2])
    for entry in ordered[2:]:
        if entry.data_file.file_size_in_bytes > size:
            break
        chosen.append(entry)
        size += entry.data_file.file_size_in_bytes
    return chosen
