"""Compaction of one partition: its data files rewritten with their deletes applied, in one snapshot.

Streaming upserts leave many small data files and position delete files behind; every
reader pays for both. :func:`compact_partition` reads the live rows of every data file
of a partition (position deletes applied, with pyiceberg's reader), writes them with the
sink's rolling writer into files of the target size, and commits one ``replace``
snapshot that adds those files and removes the old data files and every delete file of
the partition: the new files get the snapshot's sequence number, higher than any
existing delete file's, so none of those can apply to them any more.

Safe to run while a stream writes: before committing, the snapshots committed since the
compaction started are checked (:mod:`icesink.upsert.validate`). If one removed a file being
rewritten, or added position deletes to one (an upsert changed rows the rewrite copied),
committing would lose that change: the compaction gives up cleanly instead, deleting
its new files, with a retryable :class:`~icesink.errors.RewriteConflictError`. Concurrent
appends (new files of the same partition) are kept as they are.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import DataFileContent, ManifestEntry
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.snapshots import Operation

from icesink import failpoints
from icesink._pyiceberg import commit_table_updates
from icesink.commit.snapshot import SnapshotProducer, require_format_v2
from icesink.errors import RewriteConflictError, UpsertError
from icesink.upsert.validate import conflicting_data_files
from icesink.write.manifest_entry import data_file_from_message, encoded_entry
from icesink.write.messages import DataFileMessage
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter

logger = logging.getLogger(__name__)

DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024
# Attempts when the catalog refuses the commit because another writer committed first.
COMMIT_ATTEMPTS = 4
SUMMARY_COMPACTION = "icesink.compaction"


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did.

    Attributes:
        snapshot_id: The ``replace`` snapshot (``None``: nothing to compact).
        rewritten_data_files: Old data files removed.
        removed_delete_files: Delete files removed.
        added_data_files: New data files.
        rows: Live rows rewritten.
    """

    snapshot_id: int | None
    rewritten_data_files: int = 0
    removed_delete_files: int = 0
    added_data_files: int = 0
    rows: int = 0


def compact_partition(
    table: Table,
    partition: tuple[Any, ...],
    target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
    min_files: int = 2,
) -> CompactionResult:
    """Rewrite the data files of ``partition`` (Iceberg representation, default spec) with deletes applied.

    Args:
        table: The table (format v2).
        partition: The partition's values, in spec order (e.g. ``(3,)`` for bucket 3).
        target_file_size_bytes: Size at which the new files roll.
        min_files: Compact only when the partition has at least this many data files
            or any delete file.

    Raises:
        RewriteConflictError: A concurrent commit changed files being rewritten (retryable).
    """
    require_format_v2(table)
    table.refresh()
    start = table.current_snapshot()
    if start is None:
        return CompactionResult(None)
    data_entries, delete_entries, index = _partition_files(table, partition)
    if not data_entries or (len(data_entries) < min_files and not delete_entries):
        return CompactionResult(None)
    rows, new_files = _rewrite(table, partition, data_entries, index, target_file_size_bytes)
    rewritten = {e.data_file.file_path for e in data_entries}
    producer = SnapshotProducer(
        table, Operation.REPLACE, snapshot_properties={SUMMARY_COMPACTION: str(partition)}
    )
    for message in new_files:
        producer.add_file(data_file_from_message(message), encoded_entry(message))
    for path in rewritten | {e.data_file.file_path for e in delete_entries}:
        producer.remove_path(path)
    snapshot_id = _commit(table, producer, start.snapshot_id, rewritten, new_files)
    logger.info(
        "compacted partition %s of %s: %s data and %s delete files into %s files (%s rows), snapshot %s",
        partition,
        _name(table),
        len(data_entries),
        len(delete_entries),
        len(new_files),
        rows,
        snapshot_id,
    )
    return CompactionResult(snapshot_id, len(data_entries), len(delete_entries), len(new_files), rows)


def _partition_files(
    table: Table, partition: tuple[Any, ...]
) -> tuple[list[ManifestEntry], list[ManifestEntry], DeleteFileIndex]:
    """Live data and delete entries of the partition (default spec), and the deletes indexed."""
    spec_id = table.metadata.default_spec_id
    snapshot = table.current_snapshot()
    assert snapshot is not None
    data: list[ManifestEntry] = []
    deletes: list[ManifestEntry] = []
    index = DeleteFileIndex()
    for manifest in snapshot.manifests(table.io):
        if manifest.partition_spec_id != spec_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
            values = tuple(entry.data_file.partition[i] for i in range(len(entry.data_file.partition)))
            if values != tuple(partition):
                continue
            if entry.data_file.content == DataFileContent.DATA:
                data.append(entry)
            else:
                deletes.append(entry)
                index.add_delete_file(entry, partition_key=entry.data_file.partition)
    return data, deletes, index


def _rewrite(
    table: Table,
    partition: tuple[Any, ...],
    data_entries: list[ManifestEntry],
    index: DeleteFileIndex,
    target_file_size_bytes: int,
) -> tuple[int, list[DataFileMessage]]:
    """Live rows of the data files (deletes applied) written into new files; the rows and the files."""
    scan_tasks = [
        FileScanTask(
            e.data_file, index.for_data_file(e.sequence_number or 0, e.data_file, e.data_file.partition)
        )
        for e in data_entries
    ]
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table(scan_tasks)
    new_files = _write(table, rows, target_file_size_bytes)
    if any(m.partition != tuple(partition) for m in new_files):
        _delete(table, new_files)
        raise UpsertError(
            f"rewritten rows of partition {partition} do not all belong to it", table=_name(table)
        )
    return rows.num_rows, new_files


def _write(table: Table, rows: pa.Table, target_file_size_bytes: int) -> list[DataFileMessage]:
    """Write ``rows`` with the sink's writer into files of the target size."""
    if rows.num_rows == 0:
        return []
    spec = WriteSpec(
        table=_name(table),
        schema=table.schema(),
        partition_spec=table.spec(),
        data_location=table.metadata.properties.get(
            "write.data.path", f"{table.location().rstrip('/')}/data"
        ),
        io_properties=dict(table.io.properties),
        table_properties=dict(table.metadata.properties),
        file_prefix=f"compact-{uuid.uuid4().hex[:12]}",
        target_file_size_bytes=target_file_size_bytes,
        row_group_size_bytes=min(128 * 1024 * 1024, max(target_file_size_bytes // 4, 64 * 1024)),
        memory_budget_bytes=max(2 * target_file_size_bytes, 64 * 1024 * 1024),
        compression=table.metadata.properties.get("write.parquet.compression-codec", "zstd"),
        num_data_columns=len(table.schema().fields),
        partition_values_in_task=bool(table.spec().fields),
    )
    return DataTaskWriter(spec, task_id=0, attempt=0).write_all(iter(rows.to_batches()))


def _commit(
    table: Table,
    producer: SnapshotProducer,
    start_id: int,
    rewritten: set[str],
    new_files: list[DataFileMessage],
) -> int:
    """Validate and commit; on a conflict delete everything written and raise."""
    failpoints.hit("maintenance.commit")
    for attempt in range(COMMIT_ATTEMPTS):
        table.refresh()
        conflicting = conflicting_data_files(table.metadata, table.io, start_id, rewritten)
        try:
            if conflicting:
                raise RewriteConflictError(
                    f"{len(conflicting)} data files being rewritten were removed or got new deletes since "
                    f"snapshot {start_id}: {sorted(conflicting)[:5]}",
                    table=_name(table),
                    hint="run the compaction again: it plans from the current snapshot",
                )
            pending = producer.build(table.metadata)
        except (RewriteConflictError, UpsertError) as e:
            producer.clean_up()
            _delete(table, new_files)
            if isinstance(e, RewriteConflictError):
                raise
            raise RewriteConflictError(str(e), table=_name(table)) from e
        try:
            commit_table_updates(table, pending.updates, pending.requirements)
        except CommitFailedException:
            time.sleep(0.05 * 2**attempt)
            continue
        producer.clean_up(keep=pending.files)
        return producer.snapshot_id
    producer.clean_up()
    _delete(table, new_files)
    raise RewriteConflictError(f"commit refused {COMMIT_ATTEMPTS} times by the catalog", table=_name(table))


def _delete(table: Table, files: list[DataFileMessage]) -> None:
    for message in files:
        with contextlib.suppress(FileNotFoundError):
            table.io.delete(message.path)


def _name(table: Table) -> str:
    return ".".join(table.name())
