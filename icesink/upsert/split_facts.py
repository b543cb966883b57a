"""What an upsert batch's split collects in its one Spark job: the rejected changes, and the keys it deletes.

Every Spark job has a fixed cost (its planning, its scheduling, and with adaptive execution
one more job per shuffle), so the split runs one, on the batch as it came, without a shuffle:

- each change set aside (a null key, an unknown op, a truncate) as one small integer, its
  table and its reason (:meth:`SplitFacts.of`), counted in the driver: none in the usual
  batch, four bytes each when a batch is all bad. A ``groupBy().count()`` would shuffle, two
  jobs. The dead-letter rows themselves (each change as JSON) are planned only when there
  are some.
- a one-table batch's delete changes, their keys as the batch has them. The keys whose last
  change is a delete are then found in the driver after the write (:meth:`SplitFacts.deleted_keys`):
  the keys of the deletes that no written row has, since every other key's last change was
  written, unless the write dropped bad rows. No job collects them from the last changes
  after the write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["SplitFacts"]

_CODE = "__icesink_rejected"

Counts = tuple[tuple[str, str, int], ...]
"""``(table, reason, changes)``, sorted."""


class SplitFacts:
    """What the split of one batch collected (see the module).

    Args:
        facts: Collected: one row per rejected change, its ``_CODE`` its table's place in
            ``tables`` times the number of ``reasons`` plus its reason's place in ``reasons``;
            one row per delete change (a null code) with its key columns, when asked for.
        tables: The names of the batch's upserted tables.
        reasons: Every reason a change may be rejected for.
        keys: The key columns of the delete changes' rows (none: not collected).
        rows: Builds the dead-letter rows of the rejected changes.
    """

    def __init__(
        self,
        facts: pa.Table,
        tables: Sequence[str],
        reasons: Sequence[str],
        keys: Sequence[str],
        rows: Callable[[], DataFrame],
    ) -> None:
        self._facts = facts
        self._tables = tuple(tables)
        self._reasons = tuple(reasons)
        self._keys = tuple(keys)
        self._rows = rows

    @classmethod
    def collect(
        cls,
        batch_df: DataFrame,
        rejected: Column,
        tables: Sequence[str],
        table_index: Column,
        reasons: tuple[Sequence[str], Column],
        rows: Callable[[], DataFrame],
        deletes: tuple[Column, Sequence[Column], Sequence[str]] | None = None,
    ) -> SplitFacts:
        """Run the split's job on ``batch_df``.

        Args:
            batch_df: The batch as it came.
            rejected: Whether a row is a rejected change.
            tables: The names of the upserted tables.
            table_index: A row's table's place in ``tables``.
            reasons: Every reason, and a rejected row's.
            rows: Builds the dead-letter rows of the rejected changes.
            deletes: Whether a (valid) row is a delete, its key columns, and their names;
                ``None``: the delete changes are not collected.
        """
        names, reason = reasons
        place = F.array_position(F.array(*[F.lit(r) for r in names]), reason).cast("int") - 1
        code = F.when(rejected, table_index.cast("int") * len(names) + place)
        if deletes is None:
            facts = batch_df.where(rejected).select(code.alias(_CODE))
            return cls(facts.toArrow(), tables, names, (), rows)
        is_delete, key_columns, keys = deletes
        columns = [c.alias(k) for c, k in zip(key_columns, keys, strict=True)]
        facts = batch_df.where(rejected | is_delete).select(code.alias(_CODE), *columns)
        return cls(facts.toArrow(), tables, names, keys, rows)

    @cached_property
    def rejected_by_table(self) -> Counts:
        """``(table, reason, changes)`` of the rejected changes."""
        counted = pc.value_counts(self._facts.column(_CODE).drop_null()).to_pylist()
        n = len(self._reasons)
        return tuple(
            sorted(
                (self._tables[c["values"] // n], self._reasons[c["values"] % n], c["counts"]) for c in counted
            )
        )

    def deleted_keys(self, written: pa.Table) -> pa.Table | None:
        """The keys whose last change is a delete, given every key the write wrote (``written``,
        of the table's types; the write must have dropped no bad row): the delete changes' keys
        that ``written`` does not have, once each. ``None`` when the split did not collect them,
        or they are not of the written keys' types (Spark casts them then)."""
        if not self._keys:
            return None
        deleted = self._facts.filter(pc.is_null(self._facts.column(_CODE))).select(list(self._keys))
        if not set(self._keys) <= set(written.column_names):
            return None
        if [f.type for f in deleted.schema] != [written.schema.field(k).type for k in self._keys]:
            return None
        try:
            unique = deleted.group_by(list(self._keys)).aggregate([]).select(list(self._keys))
            kept = unique.join(written.select(list(self._keys)), list(self._keys), join_type="left anti")
        except pa.ArrowNotImplementedError:  # a key type Arrow's joins do not take
            return None
        return kept.select(list(self._keys)).cast(written.select(list(self._keys)).schema)

    @cached_property
    def rejected_rows(self) -> DataFrame:
        """The dead-letter rows (``source_table``, ``column``, ``reason``, ``value``, ``original_row``)."""
        return self._rows()
