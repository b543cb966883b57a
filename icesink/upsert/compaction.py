"""Compaction of one partition: data files rewritten with their deletes applied, in one snapshot.

Streaming upserts leave many small data files and position delete files behind; every
reader pays for both. :func:`compact_partition` reads the live rows of the chosen data files
of a partition (:mod:`icesink.upsert.live_rows`: the positions its delete files delete, read once
for the merge of those delete files too, applied to plain Parquet reads), writes them with the
sink's rolling writer into files of the target size, and commits one ``replace`` snapshot
that adds those files, removes the rewritten ones and replaces every delete file of the
partition by one holding the positions still live on the data files left alone
(:func:`~icesink.upsert.delete_merge.merged_deletes`; none when every data file was rewritten).
The sink's maintenance rewrites several partitions (:func:`rewrite_partition`) and commits them
with other partitions' delete file merges in one snapshot (:func:`commit_rewrites`): each
snapshot costs a commit, its manifests rewritten, and the key index's catch-up.
The new data files get the snapshot's sequence number, higher than any delete file's, so no
delete file can apply to them.

Which data files are rewritten (:func:`files_to_rewrite`): every one (``compact()``, or a
partition past ``maintenance.compact.min-delete-files``), or, LSM-style, only where it pays. In a
partition without delete files (an appended stream's), the files of each size class that holds
``maintenance.compact.min-small-files`` of them (:mod:`icesink.upsert.size_tiers`): a row is
rewritten once per class on its way to the target size, a number of times that grows with the
logarithm of the partition's size, not with the batches since the last compaction. In a partition
with delete files, the small files, smallest first, while each is no bigger than those chosen
together (a large file waits until as many bytes came in smaller ones), and any file whose share
of deleted rows reached ``maintenance.compact.delete-ratio-threshold``: rewriting small files there
also drops the delete files that point at them.

Safe to run while a stream writes: before committing, the snapshots committed since the
compaction started are checked (:mod:`icesink.upsert.rewrite_files`). If one removed a file being
rewritten, or added position deletes to one (an upsert changed rows the rewrite copied), or
removed a delete file being replaced, committing would lose that change: the compaction gives
up cleanly instead, deleting its new files, with a retryable
:class:`~icesink.errors.RewriteConflictError`. Concurrent appends (new files of the same
partition) and new delete files are kept as they are.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.manifest import ManifestEntry
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation

from icesink.commit.snapshot import SnapshotProducer
from icesink.errors import UpsertError
from icesink.upsert.delete_merge import (
    SUMMARY_DELETE_MERGE,
    DeletePositions,
    MergedDeletes,
    add_merged,
    merged_deletes,
)
from icesink.upsert.live_rows import live_rows
from icesink.upsert.rewrite_files import (
    PartitionFiles,
    commit_rewrite,
    delete_written,
    partition_files,
    rewrite_start,
    smallest_tier,
    table_name,
)
from icesink.upsert.size_tiers import tiers_to_merge
from icesink.write.manifest_entry import data_file_from_message, encoded_entry
from icesink.write.messages import DataFileMessage
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter

logger = logging.getLogger(__name__)

DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024
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
        added_delete_files: Merged delete files added (the positions left on data files not rewritten).
    """

    snapshot_id: int | None
    rewritten_data_files: int = 0
    removed_delete_files: int = 0
    added_data_files: int = 0
    rows: int = 0
    added_delete_files: int = 0


def compact_partition(
    table: Table,
    partition: tuple[Any, ...],
    target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
    min_files: int = 2,
    delete_ratio_threshold: float | None = None,
) -> CompactionResult:
    """Rewrite data files of ``partition`` (Iceberg representation, default spec) with deletes applied.

    Args:
        table: The table (format v2).
        partition: The partition's values, in spec order (e.g. ``(3,)`` for bucket 3).
        target_file_size_bytes: Size at which the new files roll.
        min_files: Compact only when the partition has at least this many data files
            or any delete file (and, choosing, when at least this many are chosen).
        delete_ratio_threshold: ``None``: every data file is rewritten. Otherwise only where it
            pays (:func:`files_to_rewrite`), a file with this share of its rows deleted among them.

    Raises:
        RewriteConflictError: A concurrent commit changed files being rewritten (retryable).
    """
    start = rewrite_start(table)
    if start is None:
        return CompactionResult(None)
    files = partition_files(table, partition)
    rewrite = rewrite_partition(
        table, partition, files, target_file_size_bytes, min_files, delete_ratio_threshold
    )
    if rewrite is None:
        return CompactionResult(None)
    snapshot_id = commit_rewrites(table, start.snapshot_id, [rewrite])
    return rewrite.result(table, snapshot_id)


@dataclass(frozen=True)
class PartitionRewrite:
    """One partition's data files rewritten, not yet committed (:func:`rewrite_partition`).

    Attributes:
        partition: The partition's values.
        rewritten: The data files rewritten.
        data_files: The partition's data files before.
        new_files: The files written.
        merged: The partition's delete files replaced by one (``None``: it had none).
        rows: Live rows rewritten.
    """

    partition: tuple[Any, ...]
    rewritten: tuple[ManifestEntry, ...]
    data_files: int
    new_files: tuple[DataFileMessage, ...]
    merged: MergedDeletes | None
    rows: int

    def written(self) -> list[DataFileMessage]:
        """Every file it wrote (deleted when it gives up)."""
        merged = self.merged.message if self.merged is not None else None
        return [*self.new_files, *([merged] if merged is not None else [])]

    def result(self, table: Table, snapshot_id: int) -> CompactionResult:
        """What it did, once committed to ``table`` in ``snapshot_id``."""
        deletes = len(self.merged.replaced) if self.merged is not None else 0
        logger.info(
            "compacted partition %s of %s: %s of %s data, %s delete files into %s files (%s rows), "
            "snapshot %s",
            self.partition,
            table_name(table),
            len(self.rewritten),
            self.data_files,
            deletes,
            len(self.new_files),
            self.rows,
            snapshot_id,
        )
        added_deletes = int(self.merged is not None and self.merged.message is not None)
        return CompactionResult(
            snapshot_id, len(self.rewritten), deletes, len(self.new_files), self.rows, added_deletes
        )


def rewrite_partition(
    table: Table,
    partition: tuple[Any, ...],
    files: PartitionFiles,
    target_file_size_bytes: int,
    min_files: int,
    delete_ratio_threshold: float | None,
    positions: DeletePositions | None = None,
    fan_in: int | None = None,
) -> PartitionRewrite | None:
    """The chosen data ``files`` of ``partition`` rewritten and its deletes merged, nothing committed
    (``None``: nothing worth it; the arguments as :func:`compact_partition`'s, ``positions``, its
    delete files' positions when read already: the rewrite and the merge share them, and ``fan_in``,
    when a partition without delete files is compacted by size class, the files a class needs)."""
    if not files.data or (len(files.data) < min_files and not files.deletes):
        return None
    if positions is None:
        positions = DeletePositions.read(table, files.deletes)
    chosen = files.data
    if delete_ratio_threshold is not None:
        tiers = fan_in if not files.deletes else None
        chosen = files_to_rewrite(
            files.data, positions.counts(), target_file_size_bytes, delete_ratio_threshold, min_files, tiers
        )
        if not chosen:
            return None
    rows = live_rows(table, chosen, files.index, positions)
    new_files = _write_partition(table, partition, rows, target_file_size_bytes)
    try:
        left = {e.data_file.file_path for e in files.data} - {e.data_file.file_path for e in chosen}
        merged = merged_deletes(table, partition, files.deletes, left, positions) if files.deletes else None
    except BaseException:
        delete_written(table, new_files)
        raise
    return PartitionRewrite(
        tuple(partition), tuple(chosen), len(files.data), tuple(new_files), merged, rows.num_rows
    )


def commit_rewrites(
    table: Table,
    start_id: int,
    rewrites: Sequence[PartitionRewrite],
    merges: Sequence[MergedDeletes] = (),
) -> int:
    """Commit ``rewrites`` (their data files and merged deletes) and the delete files ``merges``
    of other partitions in one ``replace`` snapshot; the snapshot's id.

    Raises:
        RewriteConflictError: A concurrent commit changed what was rewritten: every file written
            is deleted (retryable).
    """
    summary = {SUMMARY_COMPACTION: ",".join(str(r.partition) for r in rewrites)} if rewrites else {}
    if merges:
        summary[SUMMARY_DELETE_MERGE] = str(len(merges))
    producer = SnapshotProducer(table, Operation.REPLACE, snapshot_properties=summary)
    rewritten: set[str] = set()
    for rewrite in rewrites:
        for message in rewrite.new_files:
            producer.add_file(data_file_from_message(message), encoded_entry(message))
        for entry in rewrite.rewritten:
            producer.remove_path(entry.data_file.file_path)
            rewritten.add(entry.data_file.file_path)
    add_merged(producer, [r.merged for r in rewrites if r.merged is not None] + list(merges))
    written = [m for r in rewrites for m in r.written()] + [m.message for m in merges if m.message]
    return commit_rewrite(table, producer, start_id, rewritten, written)


def files_to_rewrite(
    data: list[ManifestEntry],
    deleted: Mapping[str, int],
    target_file_size_bytes: int,
    delete_ratio_threshold: float,
    min_files: int,
    fan_in: int | None = None,
) -> list[ManifestEntry]:
    """The data files worth rewriting (see the module), ``deleted`` holding the positions deleted of
    each: with ``fan_in``, the size classes due (a partition without delete files); else none when
    fewer than ``min_files`` small ones and none past the delete ratio."""
    if fan_in is not None:
        sizes = [e.data_file.file_size_in_bytes for e in data]
        return [data[i] for i in tiers_to_merge(sizes, target_file_size_bytes, fan_in)]
    worn = [
        e
        for e in data
        if deleted.get(e.data_file.file_path, 0) >= delete_ratio_threshold * e.data_file.record_count
    ]
    chosen = smallest_tier(
        [e for e in data if e.data_file.file_size_in_bytes < target_file_size_bytes and e not in worn]
    )
    if len(chosen) < min_files and not worn:
        return []
    return worn + chosen


def _write_partition(
    table: Table, partition: tuple[Any, ...], rows: pa.Table, target_file_size_bytes: int
) -> list[DataFileMessage]:
    """The live rows of ``partition`` written into new files of the target size."""
    new_files = _write(table, rows, target_file_size_bytes)
    if any(m.partition != tuple(partition) for m in new_files):
        delete_written(table, new_files)
        raise UpsertError(
            f"rewritten rows of partition {partition} do not all belong to it", table=table_name(table)
        )
    return new_files


def _write(table: Table, rows: pa.Table, target_file_size_bytes: int) -> list[DataFileMessage]:
    """Write ``rows`` with the sink's writer into files of the target size."""
    if rows.num_rows == 0:
        return []
    spec = WriteSpec(
        table=table_name(table),
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
