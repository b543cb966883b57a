"""Which of a batch's keys can a data file hold, from its metadata alone (partition and bounds).

For every partition field whose source is a key column, the key's transformed value
must equal the file's (with ``bucket(N, key)`` only the files of the key's bucket
remain); fields over other columns constrain nothing. Each key column's value must lie
within the file's lower and upper bound. The lookup's planner (:mod:`icesink.upsert.plan`)
and the row delta's conflict check (:mod:`icesink.upsert.validate`) ask the same question.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import DataFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
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

from icesink.type_mapping import iceberg_to_arrow_schema

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


class KeyCandidates:
    """The batch's keys, grouped by the partition values they map to in each spec.

    Args:
        keys: The key columns, of the table's Arrow types (see :meth:`of`).
        key_ids: The key columns' field ids, in the order of ``keys``' columns.
        schema: The table's schema.
        specs: The table's partition specs by id.
    """

    def __init__(
        self, keys: pa.Table, key_ids: tuple[int, ...], schema: Schema, specs: dict[int, PartitionSpec]
    ) -> None:
        self._keys = keys
        self._key_ids = key_ids
        self._types = [schema.find_field(fid).field_type for fid in key_ids]
        self._comparable = [_comparable(keys.column(i), t) for i, t in enumerate(self._types)]
        self._specs = specs
        self._spec_ids = frozenset(specs)
        self._groups: dict[int, tuple[list[int], dict[tuple[Any, ...], pa.Table]]] = {}
        self._in_partition: dict[tuple[int, tuple[Any, ...]], pa.Table] = {}

    @classmethod
    def of(cls, metadata: TableMetadata, key_columns: Sequence[str], keys: pa.Table) -> KeyCandidates:
        """The candidates of ``keys`` (Arrow types castable to the key columns') in the table."""
        schema = metadata.schema()
        key_ids = tuple(schema.find_field(name).field_id for name in key_columns)
        typed = _as_table_types(keys.select(list(key_columns)), schema, key_ids)
        return cls(typed, key_ids, schema, metadata.specs())

    @property
    def keys(self) -> pa.Table:
        """Every key, of the table's types."""
        return self._keys

    @property
    def key_ids(self) -> tuple[int, ...]:
        """The key columns' field ids."""
        return self._key_ids

    @property
    def spec_ids(self) -> frozenset[int]:
        """The partition specs whose files these candidates can be asked about."""
        return self._spec_ids

    def for_data_file(self, data_file: DataFile) -> pa.Table:
        """The keys ``data_file`` can hold, by its partition and its key columns' bounds."""
        return self.for_file(
            data_file.spec_id, data_file.partition, data_file.lower_bounds, data_file.upper_bounds
        )

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
        values: list[pa.Array] = []
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
        grouped = {(): with_cmp} if not positions else _grouped_rows(with_cmp, values)
        self._groups[spec_id] = (positions, grouped)
        return positions, grouped

    def _transformed(self, transform: Any, source_id: int) -> pa.Array | None:
        """The keys' values under ``transform``, as the partition tuple holds them (``None``: unknown)."""
        index = self._key_ids.index(source_id)
        source_type = self._types[index]
        supported = (BucketTransform, IdentityTransform, TruncateTransform)
        if not isinstance(transform, supported) or not isinstance(source_type, _ARROW_TRANSFORM_TYPES):
            return None
        try:
            values = transform.pyarrow_transform(source_type)(self._keys.column(index))
        except Exception:  # pyarrow or pyiceberg-core cannot compute it: no pruning by this field
            return None
        return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _grouped_rows(rows: pa.Table, values: list[pa.Array]) -> dict[tuple[Any, ...], pa.Table]:
    """``rows`` grouped by their ``values`` (one array per partition field, a value per row),
    by Arrow's group-by rather than row by row in Python (a batch has 100,000 keys)."""
    names = [f"__value{i}" for i in range(len(values))]
    row_numbers = pa.array(np.arange(rows.num_rows, dtype=np.int64))
    numbered = pa.table([*values, row_numbers], names=[*names, "__row"])
    groups = numbered.group_by(names, use_threads=False).aggregate([("__row", "list")])
    keys = zip(*(groups.column(n).to_pylist() for n in names), strict=True)
    indices = groups.column("__row_list").combine_chunks()
    return {key: rows.take(indices[i].values) for i, key in enumerate(keys)}


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
