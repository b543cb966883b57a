"""What a Parquet file's footer says of its rows, before the write tasks read them (:mod:`parquet_source`).

Whether pyarrow reads the table's columns from the file as Spark's reader would
(:func:`readable`), and whether every date and timestamp is within the range the sink writes,
so that no row can be bad (:func:`in_range`): by each row group's statistics where it has them,
else by reading those columns of it here (Spark writes no statistics for INT96 timestamps, its
default; reading them costs about 20-80 ms a million rows).

Spark's reader rebases dates and timestamps it takes for the legacy hybrid calendar: those of
a file marked so, or written by a Spark before 3.1, and, when its
``spark.sql.parquet.*RebaseModeInRead`` says ``LEGACY``, those of any file that is not Spark's.
Such a file is read through Spark. Of a file that is not Spark's, Spark fails on a value before
1900 unless told how to read it (``EXCEPTION``, its default): such values are read through Spark
too, which says so.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.parquet as pq

from icesink.schema.casts import arrow_range, in_arrow_range
from icesink.write.parquet_input import readable_as

INT96_UNIT = "us"  # pyarrow reads INT96 timestamps in this unit (Spark's), not as nanoseconds

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MODERN_MICROS = int((dt.datetime(1900, 1, 1, tzinfo=dt.UTC) - _EPOCH).total_seconds()) * 1_000_000
_MODERN_DAYS = (dt.date(1900, 1, 1) - _EPOCH.date()).days
_SPARK_VERSION = b"org.apache.spark.version"
_FIRST_PROLEPTIC_SPARK = (3, 1)  # Spark writes the proleptic Gregorian calendar from 3.1 on, unmarked


@dataclass(frozen=True)
class Footer:
    """A file's footer: its columns as pyarrow reads them (INT96 as timestamps of :data:`INT96_UNIT`)."""

    path: str
    schema: pa.Schema
    metadata: pq.FileMetaData

    @property
    def by_spark(self) -> bool:
        """Written by a Spark that writes the proleptic Gregorian calendar, without the legacy mark."""
        values = self.metadata.metadata or {}
        if any(k.startswith(b"org.apache.spark.legacy") for k in values):
            return False
        try:
            version = tuple(int(p) for p in values[_SPARK_VERSION].decode().split(".")[:2])
        except (KeyError, ValueError):
            return False
        return version >= _FIRST_PROLEPTIC_SPARK

    @cached_property
    def leaves(self) -> dict[str, list[int]]:
        """The file's leaf columns (their indices) under each top-level column's name."""
        schema = self.metadata.schema
        leaves: dict[str, list[int]] = {}
        for i in range(len(schema)):
            leaves.setdefault(schema.column(i).path.split(".")[0], []).append(i)
        return leaves

    def column_index(self, name: str) -> int | None:
        """The leaf column of top-level column ``name`` (``None`` when it has none, or several)."""
        leaves = self.leaves.get(name, [])
        return leaves[0] if len(leaves) == 1 else None


def read_footer(path: str) -> Footer | None:
    """``path``'s footer, or ``None`` when pyarrow cannot read it (Spark reads the file, and says why)."""
    try:
        parquet = pq.ParquetFile(path, coerce_int96_timestamp_unit=INT96_UNIT)
        try:
            return Footer(path, parquet.schema_arrow, parquet.metadata)
        finally:
            parquet.close()
    except (OSError, pa.ArrowException):
        return None


def readable(footer: Footer, target: pa.Schema, legacy_mode: bool) -> bool:
    """Whether pyarrow reads ``target``'s columns from the file as Spark would (see the module).

    ``legacy_mode``: the session's rebase mode for files that are not Spark's is ``LEGACY``."""
    values = footer.metadata.metadata or {}
    if not footer.by_spark and (legacy_mode or _SPARK_VERSION in values):
        return False  # Spark's reader rebases this file's values (an older Spark's, or marked legacy)
    found = footer.schema
    lowered = [n.lower() for n in found.names]
    for field in target:
        if lowered.count(field.name.lower()) != 1 or field.name not in found.names:
            return False  # missing, or a name Spark (case-insensitive) could match otherwise
        found_type = found.field(field.name).type
        index = footer.column_index(field.name)
        if index is not None and footer.metadata.schema.column(index).physical_type == "INT96":
            found_type = pa.timestamp(INT96_UNIT, tz="UTC")  # an instant: Spark's TIMESTAMP
        if not readable_as(found_type, field.type):
            return False
    return True


def in_range(footer: Footer, target: pa.Schema, columns: Sequence[str]) -> bool:
    """Whether every value of ``columns`` (dates, timestamps of ``target``) is one the sink writes,
    and, in a file that is not Spark's, not before 1900 (see the module)."""
    unstated: dict[int, list[str]] = {}
    for name in columns:
        low, high = _bounds(footer, target.field(name).type)
        index = footer.column_index(name)
        if index is None:
            return False
        for g in range(footer.metadata.num_row_groups):
            group = footer.metadata.row_group(g)
            stats = group.column(index).statistics
            nulls = stats.null_count if stats is not None and stats.has_null_count else 0
            if group.num_rows - nulls == 0:
                continue  # no values
            if stats is None or not stats.has_min_max or not stats.has_null_count:
                unstated.setdefault(g, []).append(name)
            elif not low <= int(stats.min_raw) <= int(stats.max_raw) <= high:
                return False
    return all(_read_in_range(footer, target, g, names) for g, names in unstated.items())


def _bounds(footer: Footer, t: pa.DataType) -> tuple[int, int]:
    low, high = arrow_range(t) or (0, -1)
    if not footer.by_spark:
        low = max(low, _MODERN_DAYS if pa.types.is_date32(t) else _MODERN_MICROS)
    return low, high


def _read_in_range(footer: Footer, target: pa.Schema, group: int, names: list[str]) -> bool:
    """Whether the row group's values of ``names``, read here, are within their bounds."""
    parquet = pq.ParquetFile(footer.path, coerce_int96_timestamp_unit=INT96_UNIT)
    try:
        table = parquet.read_row_group(group, columns=names)
    finally:
        parquet.close()
    return all(in_arrow_range(table.column(n), *_bounds(footer, target.field(n).type)) for n in names)


def row_bytes(footer: Footer, target: pa.Schema) -> int:
    """About the Arrow bytes of the file's widest row group, per row, in ``target``'s columns:
    a fixed-width value's width, else its column's bytes before compression per row, and an offset."""
    fixed = sum(f.type.byte_width for f in target if _fixed_width(f.type))
    others = {f.name for f in target if not _fixed_width(f.type)}
    leaves = [i for name in others for i in footer.leaves.get(name, [])]
    widest = 0
    for g in range(footer.metadata.num_row_groups):
        group = footer.metadata.row_group(g)
        if group.num_rows:
            varying = sum(group.column(i).total_uncompressed_size for i in leaves) // group.num_rows
            widest = max(widest, fixed + varying + 4 * len(others))
    return widest


def _fixed_width(t: pa.DataType) -> bool:
    return pa.types.is_primitive(t) and not pa.types.is_boolean(t)
