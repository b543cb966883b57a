"""The upserted tables of a routed batch: changes reduced before the projection, row deltas after the write.

A routed table is upserted when its options say ``write.mode=upsert`` (the sink's, or
its ``route.table-options`` pattern's, with that table's ``upsert.key-columns``); the op
and order columns are the sink's. The steps, for every upserted table at once, so that
the Spark jobs of a batch do not grow with its tables:

1. split   - before the projection, the last change per (table, key) (one shuffle, no job)
             and the rows with a null key or an unknown op set aside (one counting job);
             the rows of appended tables pass through as they are
2. keys    - after the write, every changed key of every upserted table: ONE job collects
             the keys of the written rows (from the projection's slots, of the tables'
             types) and of the deletes
3. lookup  - each table's lookup planned on its own snapshot (threads), then ONE Spark job
             runs the tasks of every table (:func:`~sink.upsert.lookup.run_lookups`)
4. commit  - each table's row delta on its own, with its own ledger (threads); a conflict
             redoes that table's lookup alone

Delete files go to the batch attempt's folder of their table, named with its prefix, so
the attempt records settle them after a crash as they settle its data files.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from sink.batch.changes import rejection_reason
from sink.config import SinkConfig
from sink.destinations.projection import RoutedProjection
from sink.destinations.resolve import destination_value, quoted
from sink.metrics import SinkMetrics
from sink.upsert.changes import DELETE_OP, TRUNCATE_OP, UPSERT_OPS, last_changes_df
from sink.write.messages import RowCounts

if TYPE_CHECKING:
    from sink.batch.table_batch import RoutedTarget

logger = logging.getLogger(__name__)

_DEST = "__icesink_change_dest"
_KEY = "__icesink_change_key"
_INDEX = "__icesink_key_index"


@dataclass(frozen=True)
class RoutedChanges:
    """A routed batch with its upserted tables' changes reduced (no upserted table: the batch as it is).

    Attributes:
        rows: What the projection writes: appended tables' rows, and the last change of
            each upserted key unless a delete (the batch's columns, in its order).
        route_column: The batch column holding the destination value.
        deletes: The last changes that are deletes; ``None`` when the batch has no op column.
        rejected: Dead letters of upserted tables' rows with a null key or an unknown op
            (the routed dead letters' columns); ``None`` when there are none.
        rejected_by_table: ``(table, reason, rows)`` of the rejected rows.
        cached: The persisted changes, released after the batch.
    """

    rows: DataFrame
    route_column: str | None = None
    deletes: DataFrame | None = None
    rejected: DataFrame | None = None
    rejected_by_table: tuple[tuple[str, str, int], ...] = ()
    cached: DataFrame | None = None

    @property
    def rejected_rows(self) -> int:
        return sum(n for _, _, n in self.rejected_by_table)

    def release(self) -> None:
        if self.cached is not None:
            self.cached.unpersist()


class RoutedUpserts:
    """The upsert steps of a routed sink (see the module docstring).

    Args:
        config: The routed sink's configuration (its op and order columns).
        metrics: Where each table's upserted and deleted keys are counted.
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self._op = config.upsert.op_column
        self._order = config.upsert.order_column
        self._case_sensitive = config.table_schema.case_sensitive
        self._metrics = metrics

    def split(
        self, batch_df: DataFrame, route_position: int, upserted: Mapping[str, SinkConfig]
    ) -> RoutedChanges:
        """Step 1: the last change per key of each upserted table, and the rows set aside.

        Args:
            batch_df: The micro-batch.
            route_position: Position of its column holding the destination value.
            upserted: Destination value -> configuration, of the values of upserted tables.
        """
        if not upserted:
            return RoutedChanges(batch_df)
        dest = destination_value(F.col(quoted(batch_df.columns[route_position])))
        is_upserted = F.coalesce(dest.isin(sorted(upserted)), F.lit(False))
        groups: dict[tuple[str, ...], list[str]] = {}
        for value, config in sorted(upserted.items()):
            groups.setdefault(config.upsert.key_columns, []).append(value)
        change_key, null_key, first_null = self._key_expressions(batch_df, dest, groups)
        op = self._column(batch_df, self._op)
        unknown_op = (
            ~F.coalesce(op.isin(*UPSERT_OPS, DELETE_OP), F.lit(False)) if op is not None else F.lit(False)
        )
        valid = ~null_key & ~unknown_op
        order = next((c for c in batch_df.columns if self._order and self._named(c, self._order)), None)
        keyed = batch_df.where(is_upserted & valid).withColumn(_DEST, dest).withColumn(_KEY, change_key)
        changes = last_changes_df(keyed, [_DEST, _KEY], order).drop(_DEST, _KEY).persist()
        is_delete = op == DELETE_OP if op is not None else F.lit(False)
        rows = batch_df.where(~is_upserted).union(changes.where(~is_delete))
        deletes = changes.where(is_delete) if op is not None else None
        tables = F.create_map(
            *[c for v, cfg in sorted(upserted.items()) for c in (F.lit(v), F.lit(cfg.table))]
        )
        op_value = op.cast("string") if op is not None else F.lit(None).cast("string")
        keyless = null_key & ~F.coalesce(op_value == TRUNCATE_OP, F.lit(False))  # a truncate has no key
        rejected = batch_df.where(is_upserted & ~valid).select(
            F.element_at(tables, dest).alias("source_table"),
            F.when(keyless, first_null).otherwise(F.lit(self._op)).alias("column"),
            rejection_reason(keyless, op_value).alias("reason"),
            F.when(keyless, F.lit(None).cast("string")).otherwise(op_value).alias("value"),
            F.to_json(
                F.struct(*[F.col(quoted(c)) for c in batch_df.columns]), {"ignoreNullFields": "false"}
            ).alias("original_row"),
        )
        counted = rejected.groupBy("source_table", "reason").count().collect()
        by_table = tuple(sorted((str(r["source_table"]), str(r["reason"]), int(r["count"])) for r in counted))
        route_column = batch_df.columns[route_position]
        return RoutedChanges(rows, route_column, deletes, rejected if by_table else None, by_table, changes)

    def _key_expressions(
        self, batch_df: DataFrame, dest: Column, groups: Mapping[tuple[str, ...], list[str]]
    ) -> tuple[Column, Column, Column]:
        """Per row: its key as JSON text, whether a key column is null, and the first null one."""
        change_key = null_key = first_null = None
        for keys, values in groups.items():
            columns = [self._column(batch_df, k) for k in keys]
            present = [c if c is not None else F.lit(None) for c in columns]
            text = F.to_json(F.struct(*[c.alias(k) for c, k in zip(present, keys, strict=True)]))
            nulls = functools.reduce(lambda a, b: a | b, [c.isNull() for c in present])
            first = F.coalesce(*[F.when(c.isNull(), F.lit(k)) for c, k in zip(present, keys, strict=True)])
            mine = dest.isin(values)
            change_key = F.when(mine, text) if change_key is None else change_key.when(mine, text)
            null_key = F.when(mine, nulls) if null_key is None else null_key.when(mine, nulls)
            first_null = F.when(mine, first) if first_null is None else first_null.when(mine, first)
        assert change_key is not None and null_key is not None and first_null is not None
        return change_key, F.coalesce(null_key, F.lit(False)), first_null

    def _column(self, batch_df: DataFrame, name: str) -> Column | None:
        """The batch column named ``name`` (case-insensitive unless the sink is), or ``None``."""
        found = next((c for c in batch_df.columns if self._named(c, name)), None)
        return F.col(quoted(found)) if found is not None else None

    def _named(self, column: str, name: str) -> bool:
        return column == name or (not self._case_sensitive and column.lower() == name.lower())

    def dead_letters(
        self, changes: RoutedChanges, projected: Callable[[], DataFrame], counts: RowCounts
    ) -> tuple[Callable[[], DataFrame], RowCounts]:
        """The batch's dead letters with the rejected changes, and the counts they go with."""
        rejected = changes.rejected
        if rejected is None:
            return projected, counts

        def both() -> DataFrame:
            return projected().unionByName(rejected) if counts.bad_rows else rejected

        n = changes.rejected_rows
        return both, RowCounts(counts.input_rows + n, counts.bad_rows + n)

    def count_rejected(self, changes: RoutedChanges) -> None:
        """Count the rejected changes by table and reason (once their dead letters are committed)."""
        for table, reason, n in changes.rejected_by_table:
            self._metrics.dead_letter_reasons.labels(table, reason).inc(n)

    def changed_keys(
        self, tables: Sequence[RoutedTarget], projection: RoutedProjection, changes: RoutedChanges
    ) -> dict[int, pa.Table]:
        """Step 2: every changed key of each upserted table, of its table's types: ONE Spark job.

        The written rows' keys come from the projection (bad rows left out: their key's
        current row stays); the deletes' keys are cast to the same types, a key of no
        table type matching no row.
        """
        rows, deletes, route_column = projection.rows, changes.deletes, changes.route_column
        index, bad = F.col(rows.columns[0]), F.col(rows.columns[1])
        slots: dict[int, list[str]] = {}  # table index -> its key slot columns, in key order
        for t in tables:
            names = [f.name for f in t.table.schema().fields]
            positions = projection.slots[t.index]
            slots[t.index] = [rows.columns[positions[names.index(k)]] for k in t.config.upsert.key_columns]
        types = {c: rows.schema[c].dataType for c in sorted({c for cs in slots.values() for c in cs})}
        indexes = [t.index for t in tables]
        written = rows.where(index.isin(indexes) & ~bad).select(
            index.alias(_INDEX), *[F.col(c) for c in types]
        )
        if deletes is not None and route_column is not None:
            written = written.union(self._deleted_keys(tables, deletes, route_column, slots, types))
        collected = written.toArrow()
        keys: dict[int, pa.Table] = {}
        for t in tables:
            mine = collected.filter(pc.equal(collected.column(_INDEX), t.index)).select(slots[t.index])
            keys[t.index] = mine.rename_columns(list(t.config.upsert.key_columns)).drop_null()
        return keys

    def _deleted_keys(
        self,
        tables: Sequence[RoutedTarget],
        deletes: DataFrame,
        route_column: str,
        slots: Mapping[int, list[str]],
        types: Mapping[str, DataType],
    ) -> DataFrame:
        """The deletes' keys in the columns of the written keys (each slot of its tables' type)."""
        pairs = [c for t in tables for v in t.values for c in (F.lit(v), F.lit(t.index))]
        index = F.element_at(F.create_map(*pairs), destination_value(F.col(quoted(route_column))))
        columns = []
        for slot, spark_type in types.items():
            users = [t for t in tables if slot in slots[t.index]]
            name = users[0].config.upsert.key_columns[slots[users[0].index].index(slot)]
            raw = self._column(deletes, name)
            value = raw.try_cast(spark_type) if raw is not None else F.lit(None).cast(spark_type)
            columns.append(F.when(index.isin([t.index for t in users]), value).alias(slot))
        return deletes.select(index.alias(_INDEX), *columns)
