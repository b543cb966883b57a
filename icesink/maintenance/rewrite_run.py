"""One maintenance run's rewrites of a table: its compactions and delete file merges in one snapshot.

The partitions planned (:mod:`icesink.maintenance.planning`) are rewritten one after the other
(:func:`~icesink.upsert.compaction.rewrite_partition`) while the budget allows, the delete files
of the other partitions due are merged (:func:`~icesink.upsert.delete_merge.merged_deletes`), and
all of it is committed in one ``replace`` snapshot
(:func:`~icesink.upsert.compaction.commit_rewrites`). A snapshot per partition, and one more for
the merges, cost a commit each (every manifest holding a rewritten file written again, the catalog
call) and the key index a catch-up each; one snapshot costs that once.

The live files of every partition involved are found in one pass over the current snapshot's
manifests, and each delete file is read once: a partition examined for rewriting and then only
merged (no data file worth rewriting) merges the positions its examination read. A conflict
with another commit gives every partition of the run back: the run's files are deleted and
nothing is committed (:class:`~icesink.errors.RewriteConflictError`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyiceberg.table import Table

from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance.planning import Partition, Rewrite
from icesink.upsert.compaction import CompactionResult, PartitionRewrite, commit_rewrites, rewrite_partition
from icesink.upsert.delete_merge import DeletePositions, MergedDeletes, deletes_to_merge, merged_deletes
from icesink.upsert.rewrite_files import PartitionFiles, delete_written, files_by_partition, rewrite_start


@dataclass(frozen=True)
class RewriteRun:
    """What :func:`rewrite_partitions` did.

    Attributes:
        tried: The partitions planned for rewriting that it examined (rewritten or not worth it).
        compacted: Each partition rewritten, committed.
        merges: The delete file merges committed (partitions not rewritten).
        snapshot_id: The ``replace`` snapshot (``None``: nothing to commit).
    """

    tried: list[Rewrite] = field(default_factory=list)
    compacted: list[CompactionResult] = field(default_factory=list)
    merges: list[MergedDeletes] = field(default_factory=list)
    snapshot_id: int | None = None


def rewrite_partitions(
    table: Table,
    rewrites: Sequence[Rewrite],
    merges: Sequence[Partition],
    config: MaintenanceConfig,
    target_file_size_bytes: int,
    next_partition: Callable[[], bool],
) -> RewriteRun:
    """Rewrite ``rewrites`` in order while ``next_partition()`` says so, merge the delete files of
    ``merges`` not rewritten, and commit it all in one snapshot (see the module).

    Raises:
        RewriteConflictError: A concurrent commit changed what was rewritten (retryable).
    """
    start = rewrite_start(table)
    if start is None:
        return RewriteRun()
    files = files_by_partition(table, {r.partition for r in rewrites} | set(merges))
    tried: list[Rewrite] = []
    done: list[PartitionRewrite] = []
    merged: list[MergedDeletes] = []
    positions: dict[Partition, DeletePositions] = {}  # each delete file read once
    try:
        for rewrite in rewrites:
            if not next_partition():
                break
            tried.append(rewrite)
            ratio = None if rewrite.full else config.delete_ratio_threshold
            found = files.get(rewrite.partition, PartitionFiles())
            read = positions[rewrite.partition] = DeletePositions.read(table, found.deletes)
            result = rewrite_partition(
                table,
                rewrite.partition,
                found,
                target_file_size_bytes,
                2,
                ratio,
                read,
                config.min_small_files,
            )
            if result is not None:
                done.append(result)
        rewritten = {r.partition for r in done}
        for partition in merges:
            found = files.get(partition, PartitionFiles())
            chosen = deletes_to_merge(found.deletes, config.max_delete_files)
            if partition not in rewritten and chosen:
                live = {e.data_file.file_path for e in found.data}
                merged.append(merged_deletes(table, partition, chosen, live, positions.get(partition)))
    except BaseException:
        delete_written(
            table, [m for r in done for m in r.written()] + [m.message for m in merged if m.message]
        )
        raise
    if not done and not merged:
        return RewriteRun(tried)
    snapshot_id = commit_rewrites(table, start.snapshot_id, done, merged)
    return RewriteRun(tried, [r.result(table, snapshot_id) for r in done], merged, snapshot_id)
