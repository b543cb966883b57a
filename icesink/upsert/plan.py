"""Driver side of the lookup: which data files can hold a batch's keys, from metadata alone.

The driver reads the table's manifests (never a data file) and keeps, for every live
data file, the keys that its partition and its column bounds allow
(:class:`~icesink.upsert.candidates.KeyCandidates`).

Each remaining file becomes a :class:`~icesink.upsert.messages.LookupTask` carrying its
candidate keys and the position delete files that already apply to it (same partition,
sequence number at least the data file's, path within their bounds), so the task skips
rows deleted before.

With a commit cadence, batches staged but not yet committed
(:class:`~icesink.commit.staging.StagedBatch`) are searched too: their data files are
candidates like the table's (pruned by partition and bounds from their messages), and
every data file's task lists the staged delete files of its partition, so a row an
earlier staged batch replaced is not found again. This is valid because the staged
batches are committed in one snapshot: a position delete applies to the data files of
its partition whose data sequence number is at most its own, those of the same snapshot
included. Manifests never change once written: their entries are cached by
path, so a stream pays for reading each manifest once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata

from icesink.commit.staging import StagedBatch
from icesink.errors import UpsertError
from icesink.upsert.candidates import KeyCandidates
from icesink.upsert.messages import LookupTask
from icesink.write.messages import DataFileMessage

logger = logging.getLogger(__name__)

# Manifests whose entries the planner keeps in memory (each is read once per stream).
DEFAULT_CACHED_MANIFESTS = 4096


@dataclass(frozen=True)
class LookupPlan:
    """The files a batch's lookup reads.

    Attributes:
        snapshot_id: The snapshot planned from (``None``: the table is empty); the
            snapshot the batch's row delta starts on and validates from.
        tasks: One task per data file that can hold a key.
        files_in_table: Live data files of the snapshot.
        keys: Keys looked up.
    """

    snapshot_id: int | None
    tasks: tuple[LookupTask, ...]
    files_in_table: int
    keys: int

    @property
    def files_to_read(self) -> int:
        return len(self.tasks)


class LookupPlanner:
    """Plans lookups of one table's keys (caches manifest entries across batches).

    Args:
        io: The table's FileIO (manifests are read through it).
        key_columns: Names of the key columns (top-level table columns).
        table_name: The table, for log lines.
        cached_manifests: Most manifests whose entries are kept.
    """

    def __init__(
        self,
        io: FileIO,
        key_columns: Sequence[str],
        table_name: str = "",
        cached_manifests: int = DEFAULT_CACHED_MANIFESTS,
    ) -> None:
        self._io = io
        self._table_name = table_name
        self._key_columns = tuple(key_columns)
        self._cache: OrderedDict[str, list[ManifestEntry]] = OrderedDict()
        self._cached_manifests = cached_manifests

    def plan(self, metadata: TableMetadata, keys: pa.Table, staged: Sequence[StagedBatch] = ()) -> LookupPlan:
        """Plan the lookup of ``keys`` (a table of the key columns) in the current snapshot and
        the data files of the ``staged`` batches (see the module)."""
        snapshot = metadata.current_snapshot()
        snapshot_id = snapshot.snapshot_id if snapshot else None
        staged_data = [f for b in staged for f in b.files]
        if (snapshot is None and not staged_data) or keys.num_rows == 0:
            return LookupPlan(snapshot_id, (), 0, keys.num_rows)
        candidates = KeyCandidates.of(metadata, self._key_columns, keys)
        keys = candidates.keys
        staged_deletes: dict[tuple[int, tuple[Any, ...]], list[str]] = {}
        for message in (f for b in staged for f in b.delete_files):
            staged_deletes.setdefault((message.spec_id, tuple(message.partition)), []).append(message.path)
        tasks: list[LookupTask] = []
        manifests = snapshot.manifests(self._io) if snapshot else []
        data_entries = [e for m in manifests if m.content == ManifestContent.DATA for e in self._entries(m)]
        deletes = self._delete_index(manifests)
        for entry in data_entries:
            data_file = entry.data_file
            subset = candidates.for_data_file(data_file)
            if subset.num_rows == 0:
                continue
            partition = tuple(data_file.partition[i] for i in range(len(data_file.partition)))
            applying = deletes.for_data_file(
                entry.sequence_number or 0, data_file, partition_key=data_file.partition
            )
            paths = [d.file_path for d in applying] + staged_deletes.get((data_file.spec_id, partition), [])
            tasks.append(
                self._task(
                    len(tasks),
                    data_file.file_path,
                    data_file.spec_id,
                    partition,
                    data_file.record_count,
                    candidates,
                    subset,
                    paths,
                )
            )
        tasks += self._staged_tasks(staged_data, candidates, staged_deletes, len(tasks))
        files = len(data_entries) + len(staged_data)
        logger.info(
            "lookup of %s keys in %s at snapshot %s with %s staged batches: %s of %s data files to read",
            keys.num_rows,
            self._table_name,
            snapshot_id,
            len(staged),
            len(tasks),
            files,
        )
        return LookupPlan(snapshot_id, tuple(tasks), files, keys.num_rows)

    def _staged_tasks(
        self,
        staged_data: list[DataFileMessage],
        candidates: KeyCandidates,
        staged_deletes: dict[tuple[int, tuple[Any, ...]], list[str]],
        first_index: int,
    ) -> list[LookupTask]:
        """The tasks of the staged batches' data files that can hold a key."""
        tasks: list[LookupTask] = []
        for message in staged_data:
            subset = candidates.for_file(
                message.spec_id, message.partition, message.lower_bounds, message.upper_bounds
            )
            if subset.num_rows == 0:
                continue
            partition = tuple(message.partition)
            paths = staged_deletes.get((message.spec_id, partition), [])
            tasks.append(
                self._task(
                    first_index + len(tasks),
                    message.path,
                    message.spec_id,
                    partition,
                    message.record_count,
                    candidates,
                    subset,
                    paths,
                )
            )
        return tasks

    @staticmethod
    def _task(
        index: int,
        path: str,
        spec_id: int,
        partition: tuple[Any, ...],
        record_count: int,
        candidates: KeyCandidates,
        subset: pa.Table,
        delete_files: list[str],
    ) -> LookupTask:
        return LookupTask(
            index=index,
            data_file=path,
            spec_id=spec_id,
            partition=partition,
            record_count=record_count,
            key_field_ids=candidates.key_ids,
            keys=subset,
            delete_files=tuple(sorted(delete_files)),
            partition_keys=candidates.in_partition(spec_id, partition),
        )

    def _delete_index(self, manifests: list[ManifestFile]) -> DeleteFileIndex:
        index = DeleteFileIndex()
        for manifest in manifests:
            if manifest.content != ManifestContent.DELETES:
                continue
            for entry in self._entries(manifest):
                if entry.data_file.content == DataFileContent.EQUALITY_DELETES:
                    raise UpsertError(
                        f"the table has an equality delete file ({entry.data_file.file_path}); "
                        "upserts look rows up through position deletes only",
                        hint="rewrite the table's data files with their deletes applied (compaction) "
                        "before upserting into it",
                    )
                index.add_delete_file(entry, partition_key=entry.data_file.partition)
        return index

    def _entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        """Live entries of ``manifest`` (cached: a manifest never changes once written)."""
        cached = self._cache.get(manifest.manifest_path)
        if cached is not None:
            self._cache.move_to_end(manifest.manifest_path)
            return cached
        entries = manifest.fetch_manifest_entry(self._io, discard_deleted=True)
        self._cache[manifest.manifest_path] = entries
        while len(self._cache) > self._cached_manifests:
            self._cache.popitem(last=False)
        return entries
