"""A batch's destinations, and per destination the columns it has values in: ONE Spark job.

One ``groupBy(destination).agg(count(*), count(c1), ..., count(cN))`` over the batch tells
every distinct destination value, its rows, and which columns hold at least one non-null
value in its rows. Only those columns are offered to its table's schema: a column all
null for a destination is not added to its table (each table evolves on its own).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from sink.config_route import TOPIC_COLUMNS, RouteBy, RouteConfig
from sink.errors import ConfigError

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
    found = [
        DestinationValue(row[_DEST], int(row[_ROWS]), tuple(i for i in range(n) if row[f"n{i}"] > 0))
        for row in rows
    ]
    return sorted(found, key=lambda d: (d.value is None, d.value or ""))
