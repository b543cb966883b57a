"""Positions earlier delete files removed from data files: what a lookup must not find again."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.io import FileIO

from icesink.upsert.messages import LookupTask


class DeletedPositions:
    """The positions earlier delete files removed, per data file, each delete file read once.

    The lookup's delete files are partition-scoped: every data file of a partition shares
    them. Reading them once per Spark task, not once per data file, keeps a batch's reads
    at data files plus delete files where they would grow with their product, which
    grows with the square of the batches since the last compaction. Only the current
    partition's delete files are kept (the driver hands a Spark task its lookup tasks
    ordered by partition).
    """

    def __init__(self, io: FileIO) -> None:
        self._io = io
        self._partition: tuple[int, tuple[Any, ...]] | None = None
        self._by_delete_file: dict[str, dict[str, pa.Array]] = {}

    def of(self, task: LookupTask) -> pa.Array:
        """Positions of ``task``'s data file deleted by its delete files (int64, maybe empty)."""
        partition = (task.spec_id, task.partition)
        if partition != self._partition:
            self._partition, self._by_delete_file = partition, {}
        found = [self._read(path).get(task.data_file) for path in task.delete_files]
        return pa.chunked_array([p for p in found if p is not None], pa.int64()).combine_chunks()

    def _read(self, path: str) -> dict[str, pa.Array]:
        """A delete file's positions, by the data file they refer to."""
        by_data_file = self._by_delete_file.get(path)
        if by_data_file is None:
            by_data_file = self._by_delete_file[path] = positions_by_data_file(self._io, path)
        return by_data_file


def positions_by_data_file(io: FileIO, path: str) -> dict[str, pa.Array]:
    """A position delete file's positions, by the data file they refer to."""
    with io.new_input(path).open() as stream:
        rows = pq.read_table(stream, columns=["file_path", "pos"])
    grouped = rows.group_by("file_path", use_threads=False).aggregate([("pos", "list")])
    return {
        data_file: positions.values
        for data_file, positions in zip(
            grouped.column("file_path").to_pylist(), grouped.column("pos_list"), strict=True
        )
    }
