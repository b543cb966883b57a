"""The changes of a batch set aside (a null key, an unknown op, a truncate), counted in one plain job.

The count decides whether the batch has dead letters of this kind, and it costs a Spark job
every upsert batch runs. A ``groupBy().count()`` is an aggregation: a shuffle into
``spark.sql.shuffle.partitions`` partitions, which adaptive execution plans and runs as a job of
its own before the count's, two jobs and about twice the planning. Each rejected change is
instead one small integer (its table and its reason, :meth:`RejectedChanges.of`), collected as
Arrow in one job without a shuffle and counted in the driver: none at all in the usual batch,
four bytes each when a batch is all bad. The dead-letter rows themselves (each change as JSON)
are planned only when there are some.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property

import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["RejectedChanges"]

_CODE = "__icesink_rejected"

Counts = tuple[tuple[str, str, int], ...]
"""``(table, reason, changes)``, sorted."""


class RejectedChanges:
    """The rejected changes of one batch (see the module).

    Args:
        codes: One row per rejected change: its table's place in ``tables`` times the number
            of ``reasons``, plus its reason's place in ``reasons`` (an int column).
        tables: The names of the batch's upserted tables.
        reasons: Every reason a change may be rejected for.
        rows: Builds the dead-letter rows of the rejected changes.
    """

    def __init__(
        self, codes: DataFrame, tables: Sequence[str], reasons: Sequence[str], rows: Callable[[], DataFrame]
    ) -> None:
        self._codes = codes
        self._tables = tuple(tables)
        self._reasons = tuple(reasons)
        self._rows = rows

    @classmethod
    def of(
        cls,
        rejected: DataFrame,
        tables: Sequence[str],
        table_index: Column,
        reason: Column,
        reasons: Sequence[str],
        rows: Callable[[], DataFrame],
    ) -> RejectedChanges:
        """The rejected changes ``rejected``: ``table_index`` says each one's place in ``tables``,
        ``reason`` (one of ``reasons``) why it was rejected; ``rows`` builds their dead letters."""
        place = F.array_position(F.array(*[F.lit(r) for r in reasons]), reason).cast("int") - 1
        code = (table_index.cast("int") * len(reasons) + place).alias(_CODE)
        return cls(rejected.select(code), tables, reasons, rows)

    @cached_property
    def by_table(self) -> Counts:
        """``(table, reason, changes)`` of the rejected changes (one job, the first time)."""
        counted = pc.value_counts(self._codes.toArrow().column(_CODE)).to_pylist()
        n = len(self._reasons)
        return tuple(
            sorted(
                (self._tables[c["values"] // n], self._reasons[c["values"] % n], c["counts"]) for c in counted
            )
        )

    @cached_property
    def rows(self) -> DataFrame:
        """The dead-letter rows (``source_table``, ``column``, ``reason``, ``value``, ``original_row``)."""
        return self._rows()
