"""A batch's destinations, and per destination the columns it has values in: ONE Spark job.

One ``groupBy(destination).agg(count(*), count(c1), ..., count(cN))`` over the batch tells
every distinct destination value, its rows, and which columns hold at least one non-null
value in its rows. Only those columns are offered to its table's schema: a column all
null for a destination is not added to its table (each table evolves on its own).

A batch made in Python (``df.mapInArrow(function)``, the Kafka job's decoded rows) with a
string destination column is counted where its rows are made (:func:`resolve_in_tasks`):
each task sends its counts per destination, the rows never cross to the JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.config_route import TOPIC_COLUMNS, RouteBy, RouteConfig
from icesink.errors import ConfigError
from icesink.write.task import ArrowFunction

SOURCE_PREFIX = "__icesink_src_"
_ROWS = "__icesink_rows"
_DEST = "__icesink_dest"


@dataclass(frozen=True)
class DestinationValue:
    """One distinct destination value of a batch.

    Attributes:
        value: The value as text (``None``: rows with a null destination).
        rows: Its rows in the batch.
        columns: Positions of the batch columns with a non-null value in its rows.
    """

    value: str | None
    rows: int
    columns: tuple[int, ...]


def route_column(schema: st.StructType, route: RouteConfig, case_sensitive: bool) -> int:
    """The position of the batch column holding the destination value.

    Raises:
        ConfigError: The batch has no such column; names the column and the batch's columns.
    """
    names = [f.name for f in schema.fields]
    wanted = TOPIC_COLUMNS if route.by is RouteBy.TOPIC else (str(route.field),)
    for name in wanted:
        for position, candidate in enumerate(names):
            if candidate == name or (not case_sensitive and candidate.lower() == name.lower()):
                return position
    option = "route.by=topic" if route.by is RouteBy.TOPIC else f"route.field={route.field}"
    raise ConfigError(
        f"the batch has no column {' or '.join(repr(n) for n in wanted)} to route by ({option}); "
        f"its columns are {names}",
        hint="route by a top-level column of the stream (route.field), or add the column to the query",
    )


def destination_value(source: Column) -> Column:
    """The destination value of a row as text (what names its table)."""
    return source.cast("string")


def quoted(name: str) -> str:
    """``name`` as a column reference (it may hold dots or backticks)."""
    return "`" + name.replace("`", "``") + "`"


def positional(batch_df: DataFrame) -> DataFrame:
    """``batch_df`` with its columns named by position (names may repeat, or hold dots)."""
    return batch_df.toDF(*[f"{SOURCE_PREFIX}{i}" for i in range(len(batch_df.columns))])


def resolve(batch_df: DataFrame, route_position: int) -> list[DestinationValue]:
    """The batch's destination values with their rows and non-null columns (one Spark job)."""
    source = positional(batch_df)
    n = len(source.columns)
    counts = [F.count(F.col(f"{SOURCE_PREFIX}{i}")).alias(f"n{i}") for i in range(n)]
    rows = (
        source.groupBy(destination_value(F.col(f"{SOURCE_PREFIX}{route_position}")).alias(_DEST))
        .agg(F.count(F.lit(1)).alias(_ROWS), *counts)
        .collect()
    )
    return _in_order(_destination(row[_DEST], row[1:]) for row in rows)  # rows, then n0 ... nN


def resolve_batch(
    batch_df: DataFrame, route_position: int, made_by: tuple[DataFrame, ArrowFunction] | None = None
) -> list[DestinationValue]:
    """:func:`resolve`, counted where the batch's rows are made when they are made in Python
    (``made_by``: ``batch_df`` is ``df.mapInArrow(function, ...)``), else by Spark."""
    if made_by is not None:
        found = resolve_in_tasks(*made_by, batch_df.schema, route_position)
        if found is not None:
            return found
    return resolve(batch_df, route_position)


def resolve_in_tasks(
    df: DataFrame, function: ArrowFunction, schema: st.StructType, route_position: int
) -> list[DestinationValue] | None:
    """:func:`resolve` of the batch ``df.mapInArrow(function, schema)``, counted in its tasks.

    ``None`` when the destination column is not a string: Spark and Arrow write other
    types as text differently, and the text names the table.
    """
    if not isinstance(schema.fields[route_position].dataType, st.StringType):
        return None
    n = len(schema.fields)
    counts_ddl = f"{_DEST} string, {_ROWS} long, " + ", ".join(f"n{i} long" for i in range(n))

    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in function(batches):
            if batch.num_rows:
                yield _counts(batch, route_position)

    found: dict[str | None, list[int]] = {}
    for row in df.mapInArrow(count, counts_ddl).collect():  # a row per destination per task
        totals = found.setdefault(row[_DEST], [0] * (n + 1))
        for i, value in enumerate(row[1:]):
            totals[i] += value
    return _in_order(_destination(value, totals) for value, totals in found.items())


def _destination(value: str | None, counts: Sequence[int]) -> DestinationValue:
    """A destination from its rows and its columns' non-null values (``counts``, rows first)."""
    return DestinationValue(value, int(counts[0]), tuple(i for i, n in enumerate(counts[1:]) if n > 0))


def _in_order(found: Iterable[DestinationValue]) -> list[DestinationValue]:
    """The destinations by value, the null destination last."""
    return sorted(found, key=lambda d: (d.value is None, d.value or ""))


def _counts(batch: pa.RecordBatch, route_position: int) -> pa.RecordBatch:
    """Per destination value of ``batch``: its rows, and its non-null values per column."""
    valid = {f"n{i}": pc.is_valid(column) for i, column in enumerate(batch.columns)}
    table = pa.table({_DEST: batch.column(route_position), **valid})
    grouped = table.group_by(_DEST, use_threads=False).aggregate(
        [([], "count_all"), *((name, "sum") for name in valid)]
    )
    columns = [grouped.column(_DEST), grouped.column("count_all")]
    columns += [pc.cast(grouped.column(f"{name}_sum"), pa.int64()) for name in valid]
    return pa.RecordBatch.from_arrays([c.combine_chunks() for c in columns], names=[_DEST, _ROWS, *valid])
