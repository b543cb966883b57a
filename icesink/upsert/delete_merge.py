"""Position delete files merged: a partition's deletes in one file, no data file rewritten.

An upsert batch adds a position delete file to every partition it changes, and every reader
applies each one. :func:`merge_deletes` replaces a partition's delete files by one, in one
``replace`` snapshot for all the partitions it is given (what Iceberg Java's
``rewrite_position_delete_files`` does): their positions read, those of data files no longer
live (dangling, after a rewrite of their files) dropped, the rest sorted by path and position
(:class:`~icesink.write.position_deletes.PositionDeleteWriter`). No data file is read or written.

Sequence numbers (Iceberg's spec): a position delete file applies to the data files whose data
sequence number is at most its own. The merged file takes the largest data sequence number of the
files it replaces, not the snapshot's new one: it then applies to exactly the data files one of
them applied to, never to a data file committed after them (a compaction's output among them).
Its file sequence number is the snapshot's, as for any file added.

The positions of a partition's delete files are read once a maintenance run
(:class:`DeletePositions`), their paths dictionary-encoded as Parquet stores them: the merge, and
a compaction of the partition, which applies them to the data files it reads, share that read.

Which files are merged is tiered, as an LSM store merges its runs (:func:`deletes_to_merge`):
from the smallest up, while each is no bigger than those chosen together, so a large merged file
is not rewritten for every few new ones, unless leaving it would keep the partition over its limit.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestEntry
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation

from icesink.commit.snapshot import SnapshotProducer
from icesink.upsert.rewrite_files import (
    by_size,
    commit_rewrite,
    files_by_partition,
    rewrite_start,
    smallest_tier,
)
from icesink.write.manifest_entry import data_file_from_message
from icesink.write.messages import DataFileMessage
from icesink.write.position_deletes import PATHS, PositionDeleteWriter

SUMMARY_DELETE_MERGE = "icesink.delete-merge"


@dataclass(frozen=True)
class MergedDeletes:
    """One partition's delete files merged into one (not yet committed).

    Attributes:
        replaced: The delete files it replaces.
        message: The merged file (``None``: every position was dangling; no file written).
        data_sequence_number: The largest data sequence number of ``replaced``: the merged file's.
    """

    replaced: tuple[ManifestEntry, ...]
    message: DataFileMessage | None
    data_sequence_number: int


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge_deletes` did.

    Attributes:
        snapshot_id: The ``replace`` snapshot (``None``: nothing to merge).
        partitions: Partitions whose delete files were merged.
        replaced_delete_files: Delete files removed.
        written_delete_files: Merged delete files added.
    """

    snapshot_id: int | None
    partitions: int = 0
    replaced_delete_files: int = 0
    written_delete_files: int = 0


def deletes_to_merge(deletes: list[ManifestEntry], max_delete_files: int) -> list[ManifestEntry]:
    """A partition's delete files to merge once it has more than ``max_delete_files`` (see the module)."""
    if len(deletes) <= max_delete_files:
        return []
    chosen = smallest_tier(deletes)
    return sorted(deletes, key=by_size) if len(deletes) - len(chosen) + 1 > max_delete_files else chosen


def merge_deletes(
    table: Table, partitions: Collection[tuple[Any, ...]], max_delete_files: int
) -> MergeResult:
    """Merge the delete files of each of ``partitions`` with more than ``max_delete_files``, in one snapshot.

    Raises:
        RewriteConflictError: A concurrent commit removed a delete file being merged (retryable).
    """
    start = rewrite_start(table)
    if start is None:
        return MergeResult(None)
    merges = []
    for partition, files in files_by_partition(table, set(partitions)).items():
        chosen = deletes_to_merge(files.deletes, max_delete_files)
        if chosen:
            live = {e.data_file.file_path for e in files.data}
            merges.append(merged_deletes(table, partition, chosen, live))
    if not merges:
        return MergeResult(None)
    producer = SnapshotProducer(
        table, Operation.REPLACE, snapshot_properties={SUMMARY_DELETE_MERGE: str(len(merges))}
    )
    add_merged(producer, merges)
    written = [m.message for m in merges if m.message is not None]
    snapshot_id = commit_rewrite(table, producer, start.snapshot_id, set(), written)
    return MergeResult(snapshot_id, len(merges), sum(len(m.replaced) for m in merges), len(written))


def add_merged(producer: SnapshotProducer, merges: list[MergedDeletes]) -> None:
    """Remove the replaced delete files and add the merged ones at their data sequence numbers."""
    for merge in merges:
        for entry in merge.replaced:
            producer.remove_path(entry.data_file.file_path)
        if merge.message is not None:
            producer.add_file(
                data_file_from_message(merge.message), data_sequence_number=merge.data_sequence_number
            )


def merged_deletes(
    table: Table,
    partition: tuple[Any, ...],
    deletes: list[ManifestEntry],
    live: set[str],
    positions: DeletePositions | None = None,
) -> MergedDeletes:
    """The positions of ``deletes`` (from ``positions``, when read already) on the ``live`` data
    files, written into one delete file."""
    sequence_number = max(e.sequence_number or 0 for e in deletes)
    if not live:
        return MergedDeletes(tuple(deletes), None, sequence_number)
    if positions is None:
        positions = DeletePositions.read(table, deletes)
    rows = positions.on_files([e.data_file.file_path for e in deletes], live)
    if rows.num_rows == 0:
        return MergedDeletes(tuple(deletes), None, sequence_number)
    location = table.metadata.properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
    writer = PositionDeleteWriter(
        table.io,
        f"{location.rstrip('/')}/merged-deletes-{uuid.uuid4().hex}.parquet",
        tuple(partition),
        table.metadata.default_spec_id,
        table.metadata.properties.get("write.parquet.compression-codec", "zstd"),
    )
    writer.write(rows)
    writer.close()
    return MergedDeletes(tuple(deletes), writer.result(), sequence_number)


class DeletePositions:
    """The positions of delete files (``file_path`` dictionary-encoded, ``pos``), each file read once.

    Args:
        files: Each delete file's rows, by its path.
    """

    def __init__(self, files: dict[str, pa.Table]) -> None:
        self._files = files

    @classmethod
    def read(cls, table: Table, deletes: Iterable[ManifestEntry]) -> DeletePositions:
        """Every position of the delete files ``deletes``."""
        files = {}
        for entry in deletes:
            path = entry.data_file.file_path
            with table.io.new_input(path).open() as stream:
                rows = pq.read_table(stream, columns=["file_path", "pos"], read_dictionary=["file_path"])
            files[path] = pa.table(
                {"file_path": rows["file_path"].cast(PATHS), "pos": rows["pos"].cast(pa.int64())}
            )
        return cls(files)

    def all(self) -> pa.Table:
        """Every position read (``file_path``, ``pos``)."""
        return self._concat(self._files)

    def counts(self) -> dict[str, int]:
        """Positions read per data file."""
        counts: dict[str, int] = {}
        for chunk in self.all().to_batches():
            paths = chunk.column(0)
            tally = np.bincount(paths.indices.to_numpy(zero_copy_only=False), minlength=len(paths.dictionary))
            for path, n in zip(paths.dictionary.to_pylist(), tally.tolist(), strict=True):
                counts[path] = counts.get(path, 0) + n
        return counts

    def on_files(self, delete_files: Iterable[str], data_files: Collection[str]) -> pa.Table:
        """The positions of ``delete_files`` on the ``data_files`` (``file_path``, ``pos``)."""
        wanted = pa.array(sorted(data_files), pa.string())
        rows = self._concat(delete_files)
        parts = []
        for chunk in rows.to_batches():
            paths = chunk.column(0)
            kept = pc.is_in(paths.dictionary, value_set=wanted).to_numpy(zero_copy_only=False)
            mask = kept[paths.indices.to_numpy(zero_copy_only=False)]
            parts.append(chunk.filter(pa.array(mask)) if not mask.all() else chunk)
        return pa.Table.from_batches(parts, schema=rows.schema)

    def of(self, delete_files: Iterable[str], data_file: str) -> np.ndarray:
        """The positions of ``data_file`` that ``delete_files`` delete (int64, maybe repeated)."""
        found = [np.empty(0, np.int64)]
        for chunk in self._concat(delete_files).to_batches():
            paths = chunk.column(0)
            codes = np.flatnonzero(pc.equal(paths.dictionary, data_file).to_numpy(zero_copy_only=False))
            if len(codes):
                mask = np.isin(paths.indices.to_numpy(zero_copy_only=False), codes)
                found.append(chunk.column(1).to_numpy()[mask])
        return np.concatenate(found)

    def _concat(self, delete_files: Iterable[str]) -> pa.Table:
        schema = pa.schema([("file_path", PATHS), ("pos", pa.int64())])
        return pa.concat_tables([schema.empty_table(), *(self._files[p] for p in delete_files)])
