"""A write task's rows read from Parquet files by pyarrow (for :mod:`~icesink.batch.parquet_source`).

Each task is given its share of the batch's row groups (a row group, or a range of its rows
when there are fewer row groups than tasks) and the Arrow schema of the rows Spark would have
handed it; it reads them a slice at a time and gives each slice that schema. The driver has
checked that every column it reads can take it without changing a value
(:func:`readable_as`), so the casts here only change how a type is spelled: a time zone's
name, a dictionary decoded, 64-bit offsets made 32-bit, a list's item named as Spark names it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from icesink.write.task import ArrowFunction

READ_BATCH_ROWS = 65_536  # rows pyarrow decodes at a time: the fanout merges them into its own chunks


@dataclass(frozen=True)
class RowRange:
    """Rows ``start`` to ``stop`` (exclusive) of row group ``group`` of file ``file`` (an index)."""

    file: int
    group: int
    start: int
    stop: int


def readable_as(found: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether values of Arrow type ``found`` (a file's column, as pyarrow reads it) are values of
    ``wanted`` (as Spark hands them to a write task) once cast, with no value changed."""
    if found.equals(wanted):
        return True
    if pa.types.is_dictionary(found):
        return readable_as(found.value_type, wanted)
    if pa.types.is_timestamp(found) and pa.types.is_timestamp(wanted):
        # The same unit; instants in both (only the zone's name differs), or local times in both.
        return found.unit == wanted.unit and (found.tz is None) == (wanted.tz is None)
    for kinds in _SPELLINGS:
        if any(k(found) for k in kinds) and any(k(wanted) for k in kinds):
            return _same_children(found, wanted)
    return False


_SPELLINGS = (
    (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view),
    (pa.types.is_binary, pa.types.is_large_binary, pa.types.is_binary_view),
    (pa.types.is_list, pa.types.is_large_list),
    (pa.types.is_struct,),
    (pa.types.is_map,),
)


def _same_children(found: pa.DataType, wanted: pa.DataType) -> bool:
    if pa.types.is_struct(found):  # by name and in order: Arrow's cast of a struct goes by position
        return found.num_fields == wanted.num_fields and all(
            found.field(i).name == wanted.field(i).name
            and readable_as(found.field(i).type, wanted.field(i).type)
            for i in range(found.num_fields)
        )
    if pa.types.is_map(found):
        return readable_as(found.key_type, wanted.key_type) and readable_as(found.item_type, wanted.item_type)
    if pa.types.is_list(found) or pa.types.is_large_list(found):
        return readable_as(found.value_type, wanted.value_type)
    return True  # strings and binaries: nothing inside


def read_function(
    paths: Sequence[str], shares: Sequence[Sequence[RowRange]], schema: pa.Schema
) -> ArrowFunction:
    """The function a write task runs on its input (``spark.range``: the numbers of its shares),
    giving the rows of each share as ``schema``."""
    serialized = schema.serialize().to_pybytes()

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        target = pa.ipc.read_schema(pa.py_buffer(serialized))
        for batch in batches:
            for share in batch.column(0).to_pylist():
                for rows in shares[share]:
                    yield from _read_rows(paths[rows.file], rows, target)

    return read


def _read_rows(path: str, rows: RowRange, target: pa.Schema) -> Iterator[pa.RecordBatch]:
    parquet = pq.ParquetFile(path, pre_buffer=True, coerce_int96_timestamp_unit="us")  # Spark's unit
    try:
        offset = 0
        batches = parquet.iter_batches(
            batch_size=READ_BATCH_ROWS, row_groups=[rows.group], columns=target.names, use_threads=True
        )
        for batch in batches:
            end = offset + batch.num_rows
            low, high = max(rows.start, offset), min(rows.stop, end)
            if low < high:
                yield _conformed(batch.slice(low - offset, high - low), target)
            offset = end
            if offset >= rows.stop:
                break
    finally:
        parquet.close()


def _conformed(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    arrays = []
    for field in target:
        array = batch.column(field.name)
        arrays.append(array if array.type.equals(field.type) else array.cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=target)
