"""Helpers that read a table back and check what the sink wrote."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.conversions import from_bytes
from pyiceberg.table import Snapshot, Table
from pyiceberg.types import DoubleType, FloatType, NestedField, PrimitiveType, StringType

from icesink.schema.names import field_path


def catalog_from_options(options: dict[str, str]) -> Catalog:
    props = {
        k.removeprefix("catalog."): v
        for k, v in options.items()
        if k.startswith("catalog.") and k != "catalog.name"
    }
    return load_catalog(options.get("catalog.name", "default"), **props)


def canonical(value: Any) -> Any:
    """A value in a form that compares equal across Spark and pyiceberg reads."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return tuple(sorted((k, canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        if value and isinstance(value[0], tuple) and len(value[0]) == 2:  # Arrow map as pairs
            return tuple(sorted((k, canonical(v)) for k, v in value))
        return tuple(canonical(v) for v in value)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def row_multiset(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(sorted((k, canonical(v)) for k, v in row.items())) for row in rows)


def table_rows(table: Table) -> list[dict[str, Any]]:
    return table.scan().to_arrow().to_pylist()


def data_files(table: Table) -> list[Any]:
    return [task.file for task in table.scan().plan_files()]


def added_files(table: Table, snapshot: Snapshot) -> list[str]:
    """The names (no folder) of the data files ``snapshot`` added."""
    return [
        e.data_file.file_path.rsplit("/", 1)[-1]
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.snapshot_id == snapshot.snapshot_id
    ]


def check_data_files(table: Table) -> int:
    """Check every data file against its content; return how many files were checked.

    For every file: the record count equals the rows in it, every row's partition value
    equals the file's partition tuple, and null/NaN counts and lower/upper bounds of
    primitive top-level columns match the content (a file written before a column was
    added has no statistics of it).
    """
    schema = table.schema()
    spec = table.spec()
    files = data_files(table)
    for data_file in files:
        content = pq.read_table(data_file.file_path.removeprefix("file://"))
        assert content.num_rows == data_file.record_count, data_file.file_path
        rows = content.to_pylist()
        for pos, field in enumerate(spec.fields):
            source = schema.find_field(field.source_id)
            name = field_path(schema, field.source_id)
            transform = field.transform.transform(source.field_type)
            expected = data_file.partition[pos]
            for row in rows:
                value = _dig(row, name)
                actual = transform(_to_internal(source, value))
                assert actual == expected, (data_file.file_path, field.name, value, actual, expected)
        for column in schema.fields:
            if not isinstance(column.field_type, PrimitiveType):
                continue
            if column.name not in content.column_names:  # a file written before the column was added
                assert column.field_id not in (data_file.value_counts or {}), (
                    data_file.file_path,
                    column.name,
                )
                continue
            values = [row[column.name] for row in rows]
            _check_column_stats(data_file, column, values)
    return len(files)


def _check_column_stats(data_file: Any, field: NestedField, values: list[Any]) -> None:
    assert isinstance(field.field_type, PrimitiveType)
    fid = field.field_id
    nulls = sum(v is None for v in values)
    assert data_file.null_value_counts.get(fid) == nulls, (field.name, data_file.null_value_counts)
    assert data_file.value_counts.get(fid) == len(values), field.name
    is_float = isinstance(field.field_type, (FloatType, DoubleType))
    if is_float:
        nans = sum(1 for v in values if v is not None and math.isnan(v))
        assert data_file.nan_value_counts.get(fid, 0) == nans, (field.name, data_file.nan_value_counts)
    present = [_to_internal(field, v) for v in values if v is not None and not (is_float and math.isnan(v))]
    if not present:
        return
    lower = from_bytes(field.field_type, data_file.lower_bounds[fid])
    upper = from_bytes(field.field_type, data_file.upper_bounds[fid])
    if isinstance(field.field_type, StringType):
        assert lower <= min(present) and max(present) <= upper, field.name  # bounds may be truncated
    else:
        assert lower == min(present), (field.name, lower, min(present))
        assert upper == max(present), (field.name, upper, max(present))


def _dig(row: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = row
    for part in path:
        value = value[part] if value is not None else None
    return value


def _to_internal(field: NestedField, value: Any) -> Any:
    """Python value from a Parquet read -> the representation pyiceberg transforms take."""
    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros, time_to_micros

    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return datetime_to_micros(value)
    if isinstance(value, dt.date):
        return date_to_days(value)
    if isinstance(value, dt.time):
        return time_to_micros(value)
    return value


def summary_of(snapshot: Snapshot | None) -> dict[str, str]:
    """A snapshot's summary properties (``added-records``, ``icesink.batch-ids``, ...)."""
    assert snapshot is not None and snapshot.summary is not None
    return dict(snapshot.summary.additional_properties)
