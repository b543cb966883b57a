"""Decoded rows the decoding task writes to the table itself, when the sink planned it.

Before a micro-batch's source runs, the sink may plan a write by the source's own tasks
(:class:`~icesink.sources.SourceWrite`), for one table or, for a sink routing by topic, for each table
the sink wrote before. A decoding task then gives the rows it decoded their table's
row type where it can do so exactly (:func:`~icesink.jobs.kafka.decode.types.fields_covered`:
the same fields or fewer, the same types or narrower integers, nulls) and writes them; only
the rows of another type (a new field, a wider type: what schema evolution must see
first) go on to the driver as usual. The task yields its files' messages instead of the rows.

With no plan (the sink writes the batch itself, or the values are read by another
job), nothing here is loaded beyond this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from icesink.jobs.kafka.decode.types import cast_table, fields_covered

if TYPE_CHECKING:
    from icesink.sources import DataFileMessage, SourceTaskWriter, SourceWritePlan


class TaskWrite:
    """One decoding task's part of a write planned by the sink (see the module).

    Args:
        plan: The batch's plan.
    """

    def __init__(self, plan: SourceWritePlan) -> None:
        self._plan = plan
        self._writer: SourceTaskWriter | None = None
        self._takes: dict[tuple[int, pa.Schema], bool] = {}
        self._names: dict[int, frozenset[str]] = {}

    @classmethod
    def in_task(cls) -> TaskWrite | None:
        """The task's part of its job's plan; ``None`` when the job has none."""
        from icesink.sources import plan_in_task

        plan = plan_in_task()
        return cls(plan) if plan is not None else None

    def table_of(self, records: pa.RecordBatch) -> int | None:
        """The plan's table for the rows decoded from ``records`` (raw Kafka rows); ``None``: none.

        A routed plan names a table per topic: records of one topic go to its table,
        records of several topics at once are left to the sink.
        """
        if self._plan.routes is None:
            return 0
        topics = records.column("topic")
        if len(topics) == 0 or pc.count_distinct(topics, mode="all").as_py() != 1:
            return None
        return self._plan.table_of(topics[0].as_py())

    def _fitted(self, index: int, rows: pa.Table) -> pa.Table | None:
        """``rows`` as table ``index`` takes them exactly; ``None`` if it cannot.

        A column the table lacks is left out when it holds no value in these rows: a
        task's decoder keeps the fields of the values it decoded before (other topics'
        too), null where a value lacks them.
        """
        names = self._names.get(index)
        if names is None:
            names = self._names[index] = frozenset(self._plan.tables[index].row_schema.names)
        extra = [name for name in rows.column_names if name not in names]
        if any(rows.column(name).null_count != rows.num_rows for name in extra):
            return None  # a new field: schema evolution must see it first
        if extra:
            rows = rows.drop_columns(extra)
        taken = self._takes.get((index, rows.schema))
        if taken is None:
            row_schema = self._plan.tables[index].row_schema
            taken = self._takes[(index, rows.schema)] = fields_covered(list(row_schema), list(rows.schema))
        return rows if taken else None

    def write(self, index: int, rows: pa.Table) -> bool:
        """Write ``rows`` to table ``index`` as its row type if it takes them exactly; whether it did.

        Rows it does not take (a new field, a wider type) are left to the sink.
        """
        fitted = self._fitted(index, rows)
        if fitted is None:
            return False
        if self._writer is None:
            from pyspark import TaskContext

            from icesink.sources import SourceTaskWriter

            context = TaskContext.get()
            task_id, attempt = (context.partitionId(), context.attemptNumber()) if context else (0, 0)
            self._writer = SourceTaskWriter(self._plan, task_id, attempt)
        self._writer.write(index, cast_table(fitted, self._plan.tables[index].row_schema))
        return True

    def close(self) -> list[DataFileMessage]:
        """Finish the files; the message of each (none when no rows were written)."""
        return [] if self._writer is None else self._writer.close()

    def abort(self, cause: Exception) -> None:
        """Delete the files written so far (the task fails with ``cause``)."""
        if self._writer is not None:
            self._writer.abort(cause)
