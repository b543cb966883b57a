"""The keys a routed batch changes on each of its upserted tables, collected in ONE Spark job.

After the write, the row deltas (:mod:`icesink.batch.row_deltas`) need every key each upserted
table's batch changes, of the table's types: the written rows' keys come from the one
projection's slots (bad rows left out: their key's current row stays), the deletes' keys
are cast to the same types (a key of no table type matching no row), and one job collects
them all, each tagged with its table's index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from icesink.destinations.projection import RoutedProjection
from icesink.destinations.resolve import destination_value, quoted

if TYPE_CHECKING:
    from icesink.batch.table_batch import RoutedTarget

_INDEX = "__icesink_key_index"


def routed_changed_keys(
    tables: Sequence[RoutedTarget],
    projection: RoutedProjection,
    deletes: DataFrame | None,
    route_column: str,
    case_sensitive: bool,
) -> dict[int, pa.Table]:
    """Every changed key of each upserted table (by its index), of its table's types: ONE Spark job."""
    rows = projection.rows
    index, bad = F.col(rows.columns[0]), F.col(rows.columns[1])
    slots: dict[int, list[str]] = {}  # table index -> its key slot columns, in key order
    for t in tables:
        names = [f.name for f in t.table.schema().fields]
        positions = projection.slots[t.index]
        slots[t.index] = [rows.columns[positions[names.index(k)]] for k in t.config.upsert.key_columns]
    types = {c: rows.schema[c].dataType for c in sorted({c for cs in slots.values() for c in cs})}
    indexes = [t.index for t in tables]
    written = rows.where(index.isin(indexes) & ~bad).select(index.alias(_INDEX), *[F.col(c) for c in types])
    if deletes is not None:
        written = written.union(_deleted_keys(tables, deletes, route_column, slots, types, case_sensitive))
    collected = written.toArrow()
    keys: dict[int, pa.Table] = {}
    for t in tables:
        mine = collected.filter(pc.equal(collected.column(_INDEX), t.index)).select(slots[t.index])
        keys[t.index] = mine.rename_columns(list(t.config.upsert.key_columns)).drop_null()
    return keys


def _deleted_keys(
    tables: Sequence[RoutedTarget],
    deletes: DataFrame,
    route_column: str,
    slots: Mapping[int, list[str]],
    types: Mapping[str, DataType],
    case_sensitive: bool,
) -> DataFrame:
    """The deletes' keys in the columns of the written keys (each slot of its tables' type)."""
    pairs = [c for t in tables for v in t.values for c in (F.lit(v), F.lit(t.index))]
    index = F.element_at(F.create_map(*pairs), destination_value(F.col(quoted(route_column))))
    columns = []
    for slot, spark_type in types.items():
        users = [t for t in tables if slot in slots[t.index]]
        name = users[0].config.upsert.key_columns[slots[users[0].index].index(slot)]
        raw = _column(deletes, name, case_sensitive)
        value = raw.try_cast(spark_type) if raw is not None else F.lit(None).cast(spark_type)
        columns.append(F.when(index.isin([t.index for t in users]), value).alias(slot))
    return deletes.select(index.alias(_INDEX), *columns)


def _column(df: DataFrame, name: str, case_sensitive: bool) -> Column | None:
    """The column of ``df`` named ``name`` (case-insensitive unless ``case_sensitive``), or ``None``."""
    found = next(
        (c for c in df.columns if c == name or (not case_sensitive and c.lower() == name.lower())), None
    )
    return F.col(quoted(found)) if found is not None else None
