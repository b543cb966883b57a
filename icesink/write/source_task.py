"""Executor side of a write made by the source's own tasks, as it reads the rows.

A source that makes its rows in Python (the Kafka job's decoding source) can write them
straight to Parquet instead of handing them to the JVM for a write job to read back.
The driver decides, per micro-batch, that it may (:mod:`icesink.batch.source_write`) and tells
the source's tasks how through a Spark local property of the jobs it runs for the batch
(:data:`TASK_PROPERTY`): the source's function was pickled when the query started, and
the local properties are what reaches every task of a job. The value is a
:class:`SourceWritePlan`, pickled and base64-encoded.

A task reads it with :func:`plan_in_task`; rows of exactly the plan's type go to a
:class:`SourceTaskWriter`, whose files' messages the task yields in place of the rows.
The plan carries the table's storage settings, credentials included: Spark's default
``spark.redaction.regex`` matches the property's name, so event logs show it redacted.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from icesink import failpoints

if TYPE_CHECKING:  # imported where first needed: a task without a plan loads nothing of the write
    from icesink.write.messages import DataFileMessage
    from icesink.write.spec import WriteSpec

TASK_PROPERTY = "icesink.source-write.secret"
"""The Spark local property holding a batch's :class:`SourceWritePlan` (see the module)."""


@dataclass(frozen=True)
class SourceTable:
    """One table a source task may write.

    Attributes:
        spec: The write's spec on the table: its schema and spec, where files go, their names.
        row_schema: The Arrow type of the rows the writer takes: the table's columns in
            its order, as Spark would hand them to a write task. A task writes only rows
            it can give exactly this type without loss; the rest it yields as usual.
    """

    spec: WriteSpec
    row_schema: pa.Schema


@dataclass(frozen=True)
class SourceWritePlan:
    """What a source task needs to write its rows itself.

    Attributes:
        tables: The tables the task may write.
        routes: A routed sink's destination value (the record's Kafka topic) -> the index
            of its table in ``tables``; a value not in it is not written by the task.
            ``None``: one table, ``tables[0]``, takes every row.
        memory_budget_bytes: Most memory the rows buffered by the task's open writers may
            hold, all tables together.
        faults: The executor failpoints armed in the driver (``failpoints.for_tasks``).
    """

    tables: tuple[SourceTable, ...]
    memory_budget_bytes: int
    routes: Mapping[str, int] | None = None
    faults: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def table_of(self, value: str | None) -> int | None:
        """The index of the table that takes rows routed by ``value``; ``None``: no table here."""
        if self.routes is None:
            return 0
        return None if value is None else self.routes.get(value)

    def encode(self) -> str:
        """The plan as the local property's value."""
        return base64.b64encode(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii")


def plan_in_task() -> SourceWritePlan | None:
    """The plan of the job this task belongs to; ``None`` outside one (or outside Spark)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    text = context.getLocalProperty(TASK_PROPERTY) if context is not None else None
    return _decoded(text) if text else None


@functools.lru_cache(maxsize=4)  # every task of a batch gets the same plan; a worker runs many
def _decoded(text: str) -> SourceWritePlan:
    plan = pickle.loads(base64.b64decode(text))
    if not isinstance(plan, SourceWritePlan):
        raise TypeError(f"the local property {TASK_PROPERTY!r} holds a {type(plan).__name__}, not a plan")
    return plan


class SourceTaskWriter:
    """The data files of one source task's rows, each table's rows of its ``row_schema``.

    Every table shares one fanout (:class:`~icesink.write.routed_task.RoutedTaskWriter`), so
    the plan's memory budget is the task's, however many tables it writes.

    Args:
        plan: The batch's plan.
        task_id: The task's partition id (in the file names).
        attempt: The task's attempt number (in the file names).
    """

    def __init__(self, plan: SourceWritePlan, task_id: int, attempt: int) -> None:
        from icesink.write.allocator import use_write_pool
        from icesink.write.memory import PeakRssSampler
        from icesink.write.routed_task import DestinationSpec, RoutedTaskWriter, RoutedWriteSpec
        from icesink.write.task_clock import TaskClock

        use_write_pool()  # the rows this task decodes next, and its files' copies
        self._clock = TaskClock()  # the task's input ends when it closes its files
        # For as long as the writer is open: the failpoints, and the worker's peak memory.
        self._armed = contextlib.ExitStack()
        self._armed.enter_context(failpoints.armed_in_task(plan.faults))
        self._rss = self._armed.enter_context(PeakRssSampler())
        destinations = tuple(
            DestinationSpec(index, t.spec, tuple(range(len(t.row_schema))))
            for index, t in enumerate(plan.tables)
        )
        self._writer = RoutedTaskWriter(
            RoutedWriteSpec(destinations, plan.memory_budget_bytes), task_id, attempt
        )

    def write(self, index: int, rows: pa.Table) -> None:
        """Write ``rows`` (of ``row_schema``) to table ``index`` of the plan."""
        try:
            for batch in rows.to_batches():
                if batch.num_rows:
                    self._writer.write_destination(index, batch)
        except Exception as e:
            raise self._writer.abort(e) from e

    def close(self) -> list[DataFileMessage]:
        """Finish the files; each one's message."""
        self._clock.input_ended()
        with self._armed:
            messages = self._writer.close()
            failpoints.hit("write.task")
            self._rss.sample()
            return self._clock.stamped(messages, self._rss.peak_bytes)

    def abort(self, cause: Exception) -> Exception:
        """Delete the files written so far; the error to raise for ``cause``."""
        with self._armed:
            return self._writer.abort(cause)
