"""A change batch reduced to the last change of every key, split into rows to write and keys to look up.

Debezium's operations: ``c`` (create), ``r`` (snapshot read) and ``u`` (update) replace
the key's row (insert if absent), ``d`` deletes it. A batch without an op column is all
insert-or-replace. Within one batch the last change of a key wins: the one with the
greatest order value (for example ``_source_ts`` or a Kafka offset) when an order column
is given, else the last in the batch's order.

Every key of the batch is looked up and its current row deleted (a replace is a delete
plus an insert); only the rows whose last change is not a delete are written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DELETE_OP = "d"
TRUNCATE_OP = "t"  # a Debezium truncate: no key, never applied (dead letter ``truncate``)
UPSERT_OPS = ("c", "r", "u")
DEFAULT_OP_COLUMN = "_op"

_ROW = "__icesink_row"
_RANK = "__icesink_rank"


@dataclass(frozen=True)
class ChangeSet:
    """A batch's last change per key.

    Attributes:
        rows: The rows to write (last change not a delete), without the op column.
        keys: Every changed key (the key columns only), to look up and delete.
        rejected: Rows with a null key or an unknown op (for the dead-letter table).
    """

    rows: pa.Table
    keys: pa.Table
    rejected: pa.Table


def last_changes(batch: pa.Table, key_columns: Sequence[str], order_column: str | None = None) -> pa.Table:
    """The last row of every key of ``batch`` (by ``order_column``, then position), in batch order."""
    keys = list(key_columns)
    numbered = batch.append_column(_ROW, pa.array(range(batch.num_rows), pa.int64()))
    sort_keys = [(order_column, "ascending")] if order_column else []
    order = pc.sort_indices(numbered, sort_keys=[*sort_keys, (_ROW, "ascending")], null_placement="at_start")
    ranked = numbered.take(order)
    ranked = ranked.append_column(_RANK, pa.array(range(ranked.num_rows), pa.int64()))
    last = ranked.group_by(keys, use_threads=False).aggregate([(_RANK, "max")])
    chosen = ranked.take(last.column(f"{_RANK}_max")).sort_by(_ROW)
    return chosen.drop_columns([_ROW, _RANK])


def change_set(
    batch: pa.Table,
    key_columns: Sequence[str],
    op_column: str | None = DEFAULT_OP_COLUMN,
    order_column: str | None = None,
) -> ChangeSet:
    """Split ``batch`` into :class:`ChangeSet` (``op_column`` absent from the batch: all upserts)."""
    keys = list(key_columns)
    valid = None
    for name in keys:
        present = pc.is_valid(batch.column(name))
        valid = present if valid is None else pc.and_(valid, present)
    has_op = op_column is not None and op_column in batch.column_names
    if has_op:
        known = pc.is_in(batch.column(op_column), value_set=pa.array([*UPSERT_OPS, DELETE_OP]))
        valid = pc.and_(valid, pc.fill_null(known, False))
    assert valid is not None
    rejected = batch.filter(pc.invert(valid))
    changes = last_changes(batch.filter(valid), keys, order_column)
    if has_op:
        assert op_column is not None
        rows = changes.filter(pc.not_equal(changes.column(op_column), DELETE_OP)).drop_columns([op_column])
    else:
        rows = changes
    return ChangeSet(rows, changes.select(keys), rejected)


def last_changes_df(
    batch_df: DataFrame,
    key_columns: Sequence[str | Column],
    order_column: str | None = None,
    partitions: int | None = None,
) -> DataFrame:
    """:func:`last_changes` in Spark: one row per key, the greatest order value, then the latest row.

    "Latest" is the row's place in the batch's partitions (partition, then position),
    the order in which the source delivered them.

    ``partitions``: the Spark partitions the changes are shuffled to by key (``None``:
    ``spark.sql.shuffle.partitions``, 200 by default). The result is cached by the sink and
    read by the write (and, when the driver cannot tell the deleted keys, the key collection),
    each then running a task per partition (adaptive execution does not coalesce the
    partitions of a cached plan): about the cores, not 200 tasks of fixed cost each for
    100,000 changes.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    numbered = batch_df.withColumn(_ROW, F.monotonically_increasing_id())  # before any shuffle
    if partitions is not None:
        numbered = numbered.repartition(partitions, *key_columns)  # the window's own shuffle
    ordering = [F.col(order_column).desc_nulls_last()] if order_column else []
    window = Window.partitionBy(*key_columns).orderBy(*ordering, F.col(_ROW).desc())
    return numbered.withColumn(_RANK, F.row_number().over(window)).where(F.col(_RANK) == 1).drop(_ROW, _RANK)


@dataclass(frozen=True)
class ChangeFrames:
    """:class:`ChangeSet` of a Spark batch: rows and rejects stay in Spark, the keys come to the driver.

    Attributes:
        rows: The rows to write (last change not a delete), without the op column.
        keys: Every changed key (key columns only), collected as Arrow for the lookup plan.
        rejected: Rows with a null key or an unknown op (for the dead-letter table).
    """

    rows: DataFrame
    keys: pa.Table
    rejected: DataFrame


def change_frames(
    batch_df: DataFrame,
    key_columns: Sequence[str],
    op_column: str | None = DEFAULT_OP_COLUMN,
    order_column: str | None = None,
) -> ChangeFrames:
    """:func:`change_set` in Spark (``op_column`` absent from the batch: all upserts).

    Runs one Spark job, which collects the keys; ``rows`` and ``rejected`` are evaluated
    when the caller writes them (persist ``batch_df`` first to read the source once).
    """
    from pyspark.sql import functions as F

    valid = F.lit(True)
    for name in key_columns:
        valid = valid & F.col(name).isNotNull()
    has_op = op_column is not None and op_column in batch_df.columns
    if has_op:
        valid = valid & F.coalesce(F.col(str(op_column)).isin(*UPSERT_OPS, DELETE_OP), F.lit(False))
    changes = last_changes_df(batch_df.where(valid), key_columns, order_column)
    rows = changes.where(F.col(str(op_column)) != DELETE_OP).drop(str(op_column)) if has_op else changes
    keys = changes.select(*key_columns).toArrow()
    return ChangeFrames(rows, keys, batch_df.where(~valid))
