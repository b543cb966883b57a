"""Upsert mode's split of a batch, for one table or the upserted tables of a routed batch.

With ``write.mode=upsert`` a batch is a list of changes. :class:`ChangeSplit` keeps the last
change per (table, key) (:mod:`icesink.upsert.changes`, one shuffle, no job) and sets aside as
dead letters the rows with a null key (``null_key``), an unknown op (``unknown_op``) or a
truncate (op ``t``: ``truncate``, the sink never empties a table). One job, without a shuffle,
counts them and collects a one-table batch's delete changes (:mod:`icesink.upsert.split_facts`).
The op and order columns describe a change and are not stored; the keys a batch changes are
looked up after the write (:mod:`icesink.batch.row_deltas`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.config import SinkConfig
from icesink.destinations.resolve import quoted
from icesink.metrics import SinkMetrics
from icesink.normalize import BAD_ROW_COLUMN, NormalizedBatch
from icesink.schema.names import column_named
from icesink.spark_session import default_parallelism
from icesink.type_mapping import iceberg_to_spark_type
from icesink.upsert.changes import DELETE_OP, TRUNCATE_OP, UPSERT_OPS, ChangeSet, last_changes_df
from icesink.upsert.checks import UpsertChecks
from icesink.upsert.split_facts import SplitFacts
from icesink.write.messages import DataFileMessage, RowCounts

NULL_KEY = "null_key"
UNKNOWN_OP = "unknown_op"
TRUNCATE = "truncate"  # reason of a change with op ``t`` (a Debezium truncate), whatever its key
REASONS = (NULL_KEY, UNKNOWN_OP, TRUNCATE)
_DEST = "__icesink_change_dest"
_KEY = "__icesink_change_key"


@dataclass(frozen=True)
class ChangeBatch:
    """A batch with its upserted tables' changes reduced (none upserted: the batch as it is).

    Attributes:
        rows: What is written: appended tables' rows, and the last change of each upserted
            key unless a delete (the batch's columns, in its order).
        deletes: The last changes that are deletes; ``None`` when the batch has no op column.
        facts: What the split's job collected: the upserted rows with a null key or an unknown
            op, counted, and a one-table batch's delete changes; ``None`` when the batch upserts
            no table.
        cached: The persisted changes, released after the batch.
        collected: The changes split in the driver (:mod:`icesink.batch.collected`), which
            writes their ``rows`` (of the stored columns); ``rows`` then only describes them.
    """

    rows: DataFrame
    deletes: DataFrame | None = None
    facts: SplitFacts | None = None
    cached: DataFrame | None = None
    collected: ChangeSet | None = None

    @property
    def rejected_by_table(self) -> tuple[tuple[str, str, int], ...]:
        """``(table, reason, rows)`` of the rejected rows."""
        return self.facts.rejected_by_table if self.facts is not None else ()

    @property
    def rejected_rows(self) -> int:
        return sum(n for _, _, n in self.rejected_by_table)

    def release(self) -> None:
        """Drop the cached changes."""
        if self.cached is not None:
            self.cached.unpersist()


def rejection_reason(null_key: Column, op_value: Column) -> Column:
    """Why a rejected change is a dead letter: ``truncate``, else ``null_key``, else ``unknown_op``."""
    return (
        F.when(F.coalesce(op_value == TRUNCATE_OP, F.lit(False)), F.lit(TRUNCATE))
        .when(null_key, F.lit(NULL_KEY))
        .otherwise(F.lit(UNKNOWN_OP))
    )


class ChangeSplit:
    """The changes of a sink's batches, by its op and order columns; the rejected ones counted."""

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self._op = config.upsert.op_column
        self._order = config.upsert.order_column
        self._case_sensitive = config.table_schema.case_sensitive
        self._metrics = metrics

    def split(
        self,
        batch_df: DataFrame,
        dest: Column,
        upserted: Mapping[str, SinkConfig],
        only_upserted: bool = False,
    ) -> ChangeBatch:
        """The last change per key of each upserted table, and the rows set aside.

        Args:
            dest: Each row's destination value (a literal when the sink has one table).
            upserted: Destination value -> configuration, of the values of upserted tables.
            only_upserted: Every row goes to an upserted table (a one-table sink's).
        """
        if not upserted:
            return ChangeBatch(batch_df)
        with self.timed(config.table for config in upserted.values()):
            return self._split(batch_df, dest, upserted, only_upserted)

    @contextlib.contextmanager
    def timed(self, tables: Iterable[str], step: str = "changes") -> Iterator[None]:
        """Time ``step`` for each of ``tables`` (one Spark job serves them all, as one lookup does):
        ``changes``, the split, or ``keys``, the keys gathered after the write."""
        with contextlib.ExitStack() as timed:
            for name in dict.fromkeys(tables):
                timed.enter_context(self._metrics.time_step(name, step))
            yield

    def _split(
        self, batch_df: DataFrame, dest: Column, upserted: Mapping[str, SinkConfig], only_upserted: bool
    ) -> ChangeBatch:
        is_upserted = F.coalesce(dest.isin(sorted(upserted)), F.lit(False))
        groups: dict[tuple[str, ...], list[str]] = {}
        for value, config in sorted(upserted.items()):
            groups.setdefault(config.upsert.key_columns, []).append(value)
        partition, null_key, first_null = self._key_expressions(batch_df, dest, groups)
        op = self._column(batch_df, self._op)
        op = op.cast("string") if op is not None else None  # ops of another type: unknown, as text
        unknown_op = (
            ~F.coalesce(op.isin(*UPSERT_OPS, DELETE_OP), F.lit(False)) if op is not None else F.lit(False)
        )
        valid = ~null_key & ~unknown_op
        order = column_named(batch_df.columns, self._order, self._case_sensitive)
        # One table: the destination is a literal, which Spark drops from the window's partitioning
        # but not from the repartition's; partitioned by it, the window would shuffle the changes
        # again, into spark.sql.shuffle.partitions tasks (200 by default) of every later job on them.
        # Nor is it a column then: every DataFrame step costs the driver a plan analysis.
        one_table = only_upserted and len(upserted) == 1
        keyed = batch_df.where(is_upserted & valid)
        if not one_table:
            keyed = keyed.withColumn(_DEST, dest)
        if isinstance(partition, Column):  # tables of different key columns: the key as text
            keyed, partition = keyed.withColumn(_KEY, partition), [F.col(_KEY)]
        cores = default_parallelism(batch_df.sparkSession)
        by = partition if one_table else [F.col(_DEST), *partition]
        changes = last_changes_df(keyed, by, order, cores)
        # A routed batch reads its changes twice (its rows, then its deleted keys): cached. A
        # one-table batch reads them once (its deleted keys come from the split's job), and the
        # cache would cost a plan and a job: the driver's write collects the window's stage a
        # task a core, one task's write runs it in its one task.
        changes = changes if one_table else changes.drop(_DEST, _KEY).persist()
        is_delete = op == DELETE_OP if op is not None else F.lit(False)
        rows = changes.where(~is_delete)
        if not only_upserted:  # the appended tables' rows pass as they are
            rows = batch_df.where(~is_upserted).union(rows)
        keyless, op_value = self._keyless(null_key, op)
        tables = tuple(config.table for _, config in sorted(upserted.items()))
        reasons = (REASONS, rejection_reason(keyless, op_value))
        set_aside = functools.partial(batch_df.where, is_upserted & ~valid)  # planned when there are some
        dead_letters = functools.partial(self._rejected, set_aside, dest, upserted, null_key, first_null, op)
        keys = next(iter(upserted.values())).upsert.key_columns
        deleted = (valid & is_delete, partition, keys) if one_table and op is not None else None
        facts = SplitFacts.collect(
            batch_df,
            is_upserted & ~valid,
            tables,
            _dest_index(dest, upserted),
            reasons,
            dead_letters,
            deleted,
        )
        deletes = changes.where(is_delete) if op is not None else None
        return ChangeBatch(rows, deletes, facts, None if one_table else changes)

    def split_one(
        self,
        batch_df: DataFrame,
        config: SinkConfig,
        in_driver: Callable[[], ChangeBatch | None] | None = None,
    ) -> ChangeBatch:
        """A one-table sink's batch: upsert mode's split, its rows without the op and order
        columns (they describe a change and are not stored); append mode: the batch.

        ``in_driver``: tried first, the batch split in the driver (:mod:`icesink.batch.collected`);
        when it gives ``None``, the batch is split by Spark.

        Raises:
            UpsertError: The batch lacks a key column.
        """
        checks = UpsertChecks(config)
        if not checks.enabled:
            return ChangeBatch(batch_df)
        checks.check_keys(batch_df.columns)
        with self.timed([config.table]):
            collected = in_driver() if in_driver is not None else None
            if collected is not None:
                return collected
            changes = self._split(batch_df, F.lit(config.table), {config.table: config}, True)
        stored = [F.col(quoted(c)) for c in changes.rows.columns if c not in config.upsert.change_columns]
        return replace(changes, rows=changes.rows.select(*stored))

    def _rejected(
        self,
        set_aside: Callable[[], DataFrame],
        dest: Column,
        upserted: Mapping[str, SinkConfig],
        null_key: Column,
        first_null: Column,
        op: Column | None,
    ) -> DataFrame:
        """The rejected rows as dead letters, each naming its table, the column and why."""
        tables = F.create_map(
            *[c for v, cfg in sorted(upserted.items()) for c in (F.lit(v), F.lit(cfg.table))]
        )
        keyless, op_value = self._keyless(null_key, op)
        rows = set_aside()
        return rows.select(
            F.element_at(tables, dest).alias("source_table"),
            F.when(keyless, first_null).otherwise(F.lit(self._op)).alias("column"),
            rejection_reason(keyless, op_value).alias("reason"),
            F.when(keyless, F.lit(None).cast("string")).otherwise(op_value).alias("value"),
            F.to_json(
                F.struct(*[F.col(quoted(c)) for c in rows.columns]), {"ignoreNullFields": "false"}
            ).alias("original_row"),
        )

    @staticmethod
    def _keyless(null_key: Column, op: Column | None) -> tuple[Column, Column]:
        """Whether a rejected row is rejected for its key (a truncate has none), and its op as text."""
        op_value = op.cast("string") if op is not None else F.lit(None).cast("string")
        return null_key & ~F.coalesce(op_value == TRUNCATE_OP, F.lit(False)), op_value

    def _key_expressions(
        self, batch_df: DataFrame, dest: Column, groups: Mapping[tuple[str, ...], list[str]]
    ) -> tuple[list[Column] | Column, Column, Column]:
        """What the last change is found per (one key column set: the key columns; several: the key
        as JSON text), and per row whether a key column is null and the first null one."""
        partition = change_key = null_key = first_null = None
        for keys, values in groups.items():
            columns = [self._column(batch_df, k) for k in keys]
            present = [c if c is not None else F.lit(None) for c in columns]
            if len(groups) == 1 and all(c is not None for c in columns):
                partition = present
            text = F.to_json(F.struct(*[c.alias(k) for c, k in zip(present, keys, strict=True)]))
            nulls = functools.reduce(lambda a, b: a | b, [c.isNull() for c in present])
            first = F.coalesce(*[F.when(c.isNull(), F.lit(k)) for c, k in zip(present, keys, strict=True)])
            mine = dest.isin(values)
            change_key = F.when(mine, text) if change_key is None else change_key.when(mine, text)
            null_key = F.when(mine, nulls) if null_key is None else null_key.when(mine, nulls)
            first_null = F.when(mine, first) if first_null is None else first_null.when(mine, first)
        assert change_key is not None and null_key is not None and first_null is not None
        return (
            (partition if partition is not None else change_key),
            F.coalesce(null_key, F.lit(False)),
            first_null,
        )

    def _column(self, batch_df: DataFrame, name: str) -> Column | None:
        """The batch column named ``name`` (see :func:`column_named`), or ``None``."""
        found = column_named(batch_df.columns, name, self._case_sensitive)
        return F.col(quoted(found)) if found is not None else None

    def dead_letters(
        self, changes: ChangeBatch, dead_letters: Callable[[], DataFrame], counts: RowCounts
    ) -> tuple[Callable[[], DataFrame], RowCounts]:
        """The batch's dead letters (``dead_letters``: its bad values') with the rejected changes,
        and the counts they go with (``counts``: the write's)."""
        facts, n = changes.facts, changes.rejected_rows
        if facts is None or not n:
            return dead_letters, counts

        def both() -> DataFrame:
            return (
                dead_letters().unionByName(facts.rejected_rows, allowMissingColumns=True)
                if counts.bad_rows
                else facts.rejected_rows
            )

        return both, RowCounts(counts.input_rows + n, counts.bad_rows + n)

    def count_rejected(self, changes: ChangeBatch) -> None:
        """Count the rejected changes by table and reason (once their dead letters are committed)."""
        for table, reason, n in changes.rejected_by_table:
            self._metrics.dead_letter_reasons.labels(table, reason).inc(n)


def _dest_index(dest: Column, upserted: Mapping[str, SinkConfig]) -> Column:
    """A row's upserted table as its place among ``upserted``'s sorted destination values."""
    if len(upserted) == 1:
        return F.lit(0)
    places = [c for i, value in enumerate(sorted(upserted)) for c in (F.lit(value), F.lit(i))]
    return F.element_at(F.create_map(*places), dest)


def changed_keys(
    table: Table,
    keys: Sequence[str],
    changes: ChangeBatch,
    normalized: NormalizedBatch,
    flagged: bool,
    files: Sequence[DataFileMessage] = (),
) -> pa.Table:
    """Every key a one-table batch changes, of the table's types: written rows and deletes.

    A batch split in the driver has them all (:mod:`icesink.batch.collected`). Otherwise the
    written rows' keys come with the batch's ``files``
    (:attr:`~icesink.write.messages.DataFileMessage.keys`, sent by the write tasks), and the
    deleted keys from the split's job (:meth:`~icesink.upsert.split_facts.SplitFacts.deleted_keys`)
    when the write dropped no bad row: no job. Else the deletes are collected from the last
    changes, a job without Python workers. Without files, or files without keys (key columns
    that are not top-level), the written keys are collected with them. A change whose values
    could not be converted (``flagged``: the write dropped bad rows) is a dead letter: its key
    is not looked up, so the key's current row stays. A deleted key of no table type matches no row.
    """
    sent = [f.key_rows() for f in files]
    written = [k for k in sent if k is not None]
    if changes.collected is not None:  # every last change's key, found in the driver
        return changes.collected.keys.cast(written[0].schema) if written else changes.collected.keys
    if written and len(written) == len(sent):
        found = pa.concat_tables(written)
        if changes.deletes is None:
            return found
        told = changes.facts.deleted_keys(found) if changes.facts is not None and not flagged else None
        deleted = told if told is not None else _deleted_keys(table, keys, changes.deletes).toArrow()
        return pa.concat_tables([found, deleted.cast(found.schema)])
    rows = normalized.rows
    if normalized.bad_row_flag and flagged:
        rows = rows.where(~F.col(BAD_ROW_COLUMN))
    rows = rows.select(*keys)
    if changes.deletes is None:
        return rows.toArrow()
    return rows.unionByName(_deleted_keys(table, keys, changes.deletes)).toArrow()


def _deleted_keys(table: Table, keys: Sequence[str], deletes: DataFrame) -> DataFrame:
    """The keys of ``deletes`` cast to the table's types, those that do not cast left out."""
    schema = table.schema()
    types = {k: iceberg_to_spark_type(schema.find_field(k).field_type) for k in keys}
    deleted = deletes.select(*[F.col(quoted(k)).try_cast(types[k]).alias(k) for k in keys])
    return deleted.dropna(subset=list(keys))
