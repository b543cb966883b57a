"""Upsert mode's steps of a micro-batch: the changes split before normalize, the row delta after write.

With ``write.mode=upsert`` a batch is a list of changes. Before the usual steps,
:meth:`UpsertStep.split` keeps the last change per key (:mod:`sink.upsert.changes`) and
sets aside the rows with a null key or an unknown op (dead letters ``null_key`` and
``unknown_op``; a truncate, op ``t``, is ``truncate``: the sink never empties a table);
the rows whose last change is an insert or replace, without the op and order columns
(they describe the change, they are not stored), go through normalize, route and write
like appended rows. After the write, :meth:`UpsertStep.commit` looks the
batch's keys up and commits the new data files with the position deletes of the rows
they replace or delete in one snapshot (:class:`~sink.upsert.batch.UpsertApplier`), with
the same ledger as appends. The delete files are written in the batch attempt's own
folder, named with its prefix, so crash recovery and the clean-up of failed tasks find
them as they find its data files.

Every batch is committed: a lookup sees committed snapshots only, so a key staged but
not committed would be missed by the next batch.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from sink.commit.snapshot import require_format_v2
from sink.config import SinkConfig
from sink.errors import KeyedTableError, UpsertError
from sink.metrics import SinkMetrics
from sink.normalize import BAD_ROW_COLUMN, NormalizedBatch
from sink.type_mapping import iceberg_to_spark_type
from sink.upsert.changes import DELETE_OP, TRUNCATE_OP, UPSERT_OPS, last_changes_df
from sink.write.messages import RowCounts

logger = logging.getLogger(__name__)

NULL_KEY = "null_key"
UNKNOWN_OP = "unknown_op"
TRUNCATE = "truncate"  # reason of a change with op ``t`` (a Debezium truncate), whatever its key


@dataclass(frozen=True)
class ChangeBatch:
    """A batch as upsert mode splits it (append mode: ``rows`` is the batch, nothing else).

    Attributes:
        rows: What the usual steps write: the last change of each key, unless a delete.
        changes: The last change of every key (op column kept), persisted; ``None`` in append mode.
        rejected: Dead letters of rows with a null key or an unknown op (``column``,
            ``reason``, ``value``, ``original_row``); ``None`` when there are none.
        rejected_by_reason: How many rows were rejected, by reason.
    """

    rows: DataFrame
    changes: DataFrame | None = None
    rejected: DataFrame | None = None
    rejected_by_reason: tuple[tuple[str, int], ...] = ()

    @property
    def rejected_rows(self) -> int:
        return sum(n for _, n in self.rejected_by_reason)

    def release(self) -> None:
        """Drop the cached changes."""
        if self.changes is not None:
            self.changes.unpersist()


def rejection_reason(null_key: Column, op_value: Column) -> Column:
    """Why a rejected change is a dead letter: ``truncate``, else ``null_key``, else ``unknown_op``."""
    return (
        F.when(F.coalesce(op_value == TRUNCATE_OP, F.lit(False)), F.lit(TRUNCATE))
        .when(null_key, F.lit(NULL_KEY))
        .otherwise(F.lit(UNKNOWN_OP))
    )


class UpsertStep:
    """The upsert steps of one sink configuration (each a no-op in append mode).

    Args:
        config: The sink's configuration (its ``upsert`` section).
        metrics: Where upserted and deleted keys and delete files are counted.
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self.enabled = config.upsert.enabled
        self._keys = list(config.upsert.key_columns)

    def stored_schema(self, schema: st.StructType) -> st.StructType:
        """The columns of ``schema`` the table stores: all but the op and order columns."""
        if not self.enabled:
            return schema
        dropped = set(self.config.upsert.change_columns)
        return st.StructType([f for f in schema.fields if f.name not in dropped])

    def check_table(self, table: Table) -> None:
        """Before anything is written: an upserted table is of format v2 and has the key columns;
        an appended one has no identifier fields, unless ``write.allow-append-to-keyed-table``.

        Raises:
            UpsertError: Naming the table and what is missing.
            KeyedTableError: Append mode, and the table has identifier fields.
        """
        if not self.enabled:
            self._check_append(table)
            return
        require_format_v2(table)
        names = set(table.schema().column_names)
        missing = [k for k in self._keys if k not in names]
        if missing:
            raise UpsertError(
                f"table {self.config.table} has no key columns {missing} (columns: {sorted(names)})",
                table=self.config.table,
                hint="set upsert.key-columns to columns of the table",
            )

    def _check_append(self, table: Table) -> None:
        schema = table.schema()
        if not schema.identifier_field_ids or self.config.upsert.allow_append_to_keyed_table:
            return
        keys = [schema.find_column_name(i) for i in schema.identifier_field_ids]
        raise KeyedTableError(
            f"table {self.config.table} has identifier fields {keys} (a table upserted by key) but this "
            "sink appends (write.mode=append): a row whose key the table holds would store it twice",
            table=self.config.table,
            hint=f"upsert into it with write.mode=upsert and upsert.key-columns={','.join(map(str, keys))}, "
            "or set write.allow-append-to-keyed-table=true if the appended rows' keys are new to the "
            "table or duplicates are wanted",
        )

    def check_keys(self, columns: Sequence[str]) -> None:
        """Upsert mode: ``columns`` (a batch's) include every key column.

        Raises:
            UpsertError: Naming the missing key columns, the batch's columns and the option.
        """
        if not self.enabled:
            return
        case_sensitive = self.config.table_schema.case_sensitive
        present = set(columns) if case_sensitive else {c.lower() for c in columns}
        missing = [k for k in self._keys if (k if case_sensitive else k.lower()) not in present]
        if missing:
            raise UpsertError(
                f"the batch has no key column {missing} of option 'upsert.key-columns' "
                f"({','.join(self._keys)}); its columns are {list(columns)}",
                table=self.config.table,
                hint="give every change row its key columns, or set upsert.key-columns to the "
                "batch's key column(s) (those of the table's identifier fields)",
            )

    def split(self, batch_df: DataFrame) -> ChangeBatch:
        """The last change per key and the rejected rows (append mode: the batch as it is).

        Raises:
            UpsertError: The batch lacks a key column.
        """
        if not self.enabled:
            return ChangeBatch(batch_df)
        self.check_keys(batch_df.columns)
        op, order = self.config.upsert.op_column, self.config.upsert.order_column
        has_op = op in batch_df.columns
        null_key = functools.reduce(lambda a, b: a | b, [F.col(k).isNull() for k in self._keys])
        unknown_op = (
            ~F.coalesce(F.col(op).isin(*UPSERT_OPS, DELETE_OP), F.lit(False)) if has_op else F.lit(False)
        )
        changes = last_changes_df(batch_df.where(~null_key & ~unknown_op), self._keys, order).persist()
        if not has_op:
            changes = changes.withColumn(op, F.lit(UPSERT_OPS[0]))
        stored = [c for c in changes.columns if c not in self.config.upsert.change_columns]
        rows = changes.where(F.col(op) != DELETE_OP).select(*stored)
        rejected = self._rejected(batch_df.where(null_key | unknown_op), null_key, op if has_op else None)
        counts = {
            str(r["reason"]): int(r["n"])
            for r in rejected.groupBy("reason").agg(F.count("*").alias("n")).collect()
        }
        return ChangeBatch(rows, changes, rejected if counts else None, tuple(sorted(counts.items())))

    def _rejected(self, rows: DataFrame, null_key: Column, op: str | None) -> DataFrame:
        first_null = F.coalesce(*[F.when(F.col(k).isNull(), F.lit(k)) for k in self._keys])
        op_value = F.col(op).cast("string") if op else F.lit(None).cast("string")
        null_key = null_key & ~F.coalesce(op_value == TRUNCATE_OP, F.lit(False))  # a truncate has no key
        return rows.select(
            F.when(null_key, first_null).otherwise(F.lit(op)).alias("column"),
            rejection_reason(null_key, op_value).alias("reason"),
            F.when(null_key, F.lit(None).cast("string")).otherwise(op_value).alias("value"),
            F.to_json(F.struct(*[F.col(c) for c in rows.columns])).alias("original_row"),
        )

    def dead_letters(
        self, batch: ChangeBatch, normalized: NormalizedBatch, counts: RowCounts
    ) -> tuple[Callable[[], DataFrame], RowCounts]:
        """The batch's dead letters (bad values and rejected changes) and the counts they go with."""
        if batch.rejected is None:
            return (lambda: normalized.dead_letters), counts
        rejected = batch.rejected

        def both() -> DataFrame:
            return normalized.dead_letters.unionByName(rejected) if counts.bad_rows else rejected

        n = batch.rejected_rows
        return both, RowCounts(counts.input_rows + n, counts.bad_rows + n)

    def count_rejected(self, batch: ChangeBatch) -> None:
        """Count the rejected changes by reason (once their dead letters are committed)."""
        for reason, n in batch.rejected_by_reason:
            self.metrics.dead_letter_reasons.labels(self.config.table, reason).inc(n)

    def changed_keys(
        self, table: Table, batch: ChangeBatch, normalized: NormalizedBatch, counts: RowCounts
    ) -> pa.Table:
        """Every key the batch changes, of the table's types: written rows (bad ones left out) and deletes.

        A change whose values could not be converted is a dead letter: its key is not
        looked up, so the key's current row stays. ``counts``: the write's.
        """
        assert batch.changes is not None
        return self._changed_keys(table, batch.changes, normalized, counts.bad_rows > 0)

    def _changed_keys(
        self, table: Table, changes: DataFrame, normalized: NormalizedBatch, flagged: bool
    ) -> pa.Table:
        schema = table.schema()
        written = normalized.rows
        if normalized.bad_row_flag and flagged:
            written = written.where(~F.col(BAD_ROW_COLUMN))
        types = {k: iceberg_to_spark_type(schema.find_field(k).field_type) for k in self._keys}
        op = self.config.upsert.op_column
        deleted = changes.where(F.col(op) == DELETE_OP).select(
            *[F.col(k).try_cast(types[k]).alias(k) for k in self._keys]
        )
        deleted = deleted.dropna(subset=self._keys)  # a key of no table type matches no row
        return written.select(*self._keys).unionByName(deleted).toArrow()
