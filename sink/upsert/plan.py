"""Driver side of the lookup: which data files can hold a batch's keys, from metadata alone.

The driver reads the table's manifests (never a data file) and keeps, for every live
data file, the keys that its partition and its column bounds allow:

- partition: for every partition field whose source is a key column, the key's
  transformed value must equal the file's (with ``bucket(N, key)`` only the files of the
  key's bucket remain); fields over other columns constrain nothing;
- bounds: each key column's value must lie within the file's lower and upper bound.

Each remaining file becomes a :class:`~sink.upsert.messages.LookupTask` carrying its
candidate keys and the position delete files that already apply to it (same partition,
sequence number at least the data file's, path within their bounds), so the task skips
rows deleted before. Manifests never change once written: their entries are cached by
path, so a stream pays for reading each manifest once.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
)

from sink.errors import UpsertError
from sink.type_mapping import iceberg_to_arrow_schema
from sink.upsert.messages import LookupTask

logger = logging.getLogger(__name__)

# Manifests whose entries the planner keeps in memory (each is read once per stream).
DEFAULT_CACHED_MANIFESTS = 4096

# Types whose Iceberg bounds compare with Arrow values as they are (or as integers).
_BOUNDED_TYPES = (
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    StringType,
    BinaryType,
    DecimalType,
    DateType,
    TimestampType,
    TimestamptzType,
)
# Transforms computed on the keys with pyarrow whose results equal the partition tuple's values.
_ARROW_TRANSFORM_TYPES = (IntegerType, LongType, StringType, BinaryType)


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

    def plan(self, metadata: TableMetadata, keys: pa.Table) -> LookupPlan:
        """Plan the lookup of ``keys`` (a table of the key columns) in the current snapshot."""
        snapshot = metadata.current_snapshot()
        if snapshot is None or keys.num_rows == 0:
            return LookupPlan(snapshot.snapshot_id if snapshot else None, (), 0, keys.num_rows)
        schema = metadata.schema()
        key_ids = tuple(schema.find_field(name).field_id for name in self._key_columns)
        keys = _as_table_types(keys.select(list(self._key_columns)), schema, key_ids)
        manifests = snapshot.manifests(self._io)
        data_entries = [e for m in manifests if m.content == ManifestContent.DATA for e in self._entries(m)]
        deletes = self._delete_index(manifests)
        candidates = _KeyCandidates(keys, key_ids, schema, metadata.specs())
        tasks: list[LookupTask] = []
        for entry in data_entries:
            data_file = entry.data_file
            subset = candidates.for_file(
                data_file.spec_id, data_file.partition, data_file.lower_bounds, data_file.upper_bounds
            )
            if subset.num_rows == 0:
                continue
            delete_files = deletes.for_data_file(
                entry.sequence_number or 0, data_file, partition_key=data_file.partition
            )
            tasks.append(
                LookupTask(
                    index=len(tasks),
                    data_file=data_file.file_path,
                    spec_id=data_file.spec_id,
                    partition=tuple(data_file.partition[i] for i in range(len(data_file.partition))),
                    record_count=data_file.record_count,
                    key_field_ids=key_ids,
                    keys=subset,
                    delete_files=tuple(sorted(d.file_path for d in delete_files)),
                    partition_keys=candidates.in_partition(data_file.spec_id, data_file.partition),
                )
            )
        logger.info(
            "lookup of %s keys in %s at snapshot %s: %s of %s data files to read",
            keys.num_rows,
            self._table_name,
            snapshot.snapshot_id,
            len(tasks),
            len(data_entries),
        )
        return LookupPlan(snapshot.snapshot_id, tuple(tasks), len(data_entries), keys.num_rows)

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


class _KeyCandidates:
    """The batch's keys, grouped by the partition values they map to in each spec."""

    def __init__(
        self, keys: pa.Table, key_ids: tuple[int, ...], schema: Schema, specs: dict[int, PartitionSpec]
    ) -> None:
        self._keys = keys
        self._key_ids = key_ids
        self._types = [schema.find_field(fid).field_type for fid in key_ids]
        self._comparable = [_comparable(keys.column(i), t) for i, t in enumerate(self._types)]
        self._specs = specs
        self._groups: dict[int, tuple[list[int], dict[tuple[Any, ...], pa.Table]]] = {}
        self._in_partition: dict[tuple[int, tuple[Any, ...]], pa.Table] = {}

    def for_file(
        self,
        spec_id: int,
        partition: Any,
        lower_bounds: dict[int, bytes] | None,
        upper_bounds: dict[int, bytes] | None,
    ) -> pa.Table:
        """The keys a file of this partition and these column bounds can hold."""
        positions, groups = self._grouped(spec_id)
        group = groups.get(tuple(partition[p] for p in positions)) if positions else groups[()]
        if group is None or group.num_rows == 0:
            return self._keys.slice(0, 0)
        mask = None
        for i, (fid, iceberg_type) in enumerate(zip(self._key_ids, self._types, strict=True)):
            if self._comparable[i] is None:
                continue
            lower, upper = (lower_bounds or {}).get(fid), (upper_bounds or {}).get(fid)
            column = group.column(f"__cmp{i}")
            for bound, compare in ((lower, pc.greater_equal), (upper, pc.less_equal)):
                if bound is None:
                    continue
                value = from_bytes(cast(PrimitiveType, iceberg_type), bound)
                try:
                    part = compare(column, pa.scalar(value, type=column.type))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                    continue  # not comparable here: the file stays a candidate
                mask = part if mask is None else pc.and_(mask, part)
        selected = group if mask is None else group.filter(mask)
        return selected.select(list(range(len(self._key_ids))))

    def in_partition(self, spec_id: int, partition: Any) -> pa.Table:
        """Every key of the partition (the same table for every file of it)."""
        positions, groups = self._grouped(spec_id)
        key = tuple(partition[p] for p in positions) if positions else ()
        found = self._in_partition.get((spec_id, key))
        if found is None:
            group = groups.get(key)
            found = self._keys.slice(0, 0) if group is None else group.select(list(range(len(self._key_ids))))
            self._in_partition[(spec_id, key)] = found
        return found

    def _grouped(self, spec_id: int) -> tuple[list[int], dict[tuple[Any, ...], pa.Table]]:
        """Positions of the key-sourced fields of the spec, and the keys grouped by their values."""
        if spec_id in self._groups:
            return self._groups[spec_id]
        spec = self._specs[spec_id]
        positions: list[int] = []
        values: list[list[Any]] = []
        for position, field in enumerate(spec.fields):
            if field.source_id not in self._key_ids:
                continue
            transformed = self._transformed(field.transform, field.source_id)
            if transformed is not None:
                positions.append(position)
                values.append(transformed)
        with_cmp = self._keys
        for i, column in enumerate(self._comparable):
            if column is not None:
                with_cmp = with_cmp.append_column(f"__cmp{i}", column)
        if not positions:
            grouped = {(): with_cmp}
        else:
            rows: dict[tuple[Any, ...], list[int]] = defaultdict(list)
            for row, key in enumerate(zip(*values, strict=True)):
                rows[key].append(row)
            grouped = {key: with_cmp.take(pa.array(index, pa.int64())) for key, index in rows.items()}
        self._groups[spec_id] = (positions, grouped)
        return positions, grouped

    def _transformed(self, transform: Any, source_id: int) -> list[Any] | None:
        """The keys' values under ``transform``, as the partition tuple holds them (``None``: unknown)."""
        index = self._key_ids.index(source_id)
        source_type = self._types[index]
        supported = (BucketTransform, IdentityTransform, TruncateTransform)
        if not isinstance(transform, supported) or not isinstance(source_type, _ARROW_TRANSFORM_TYPES):
            return None
        try:
            return list(transform.pyarrow_transform(source_type)(self._keys.column(index)).to_pylist())
        except Exception:  # pyarrow or pyiceberg-core cannot compute it: no pruning by this field
            return None


def _as_table_types(keys: pa.Table, schema: Schema, key_ids: tuple[int, ...]) -> pa.Table:
    """``keys`` cast to the Arrow types of the table's key columns (an int key column may arrive as long)."""
    files = iceberg_to_arrow_schema(Schema(*(schema.find_field(fid) for fid in key_ids)))
    return keys.cast(
        pa.schema([pa.field(name, f.type) for name, f in zip(keys.column_names, files, strict=True)])
    )


def _comparable(column: pa.ChunkedArray, iceberg_type: IcebergType) -> pa.ChunkedArray | None:
    """``column`` in the representation of Iceberg's bounds (``None``: bounds do not prune it)."""
    if not isinstance(iceberg_type, _BOUNDED_TYPES):
        return None
    if isinstance(iceberg_type, DateType):
        return column.cast(pa.int32())
    if isinstance(iceberg_type, TimestampType | TimestamptzType):
        return column.cast(pa.timestamp("us", tz=getattr(column.type, "tz", None))).cast(pa.int64())
    return column
