"""Executor side of a write made by the source's own tasks, as it reads the rows.

A source that makes its rows in Python (the Kafka job's decoding source) can write them
straight to Parquet instead of handing them to the JVM for a write job to read back.
The driver decides, per micro-batch, that it may (:mod:`sink.source_write`) and tells
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
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from sink import failpoints

if TYPE_CHECKING:  # imported where first needed: a task without a plan loads nothing of the write
    from sink.write.messages import DataFileMessage
    from sink.write.task import WriteSpec

TASK_PROPERTY = "icesink.source-write.secret"
"""The Spark local property holding a batch's :class:`SourceWritePlan` (see the module)."""


@dataclass(frozen=True)
class SourceWritePlan:
    """What a source task needs to write its rows itself.

    Attributes:
        spec: The write's spec: the table's schema and spec, where files go, their names.
        row_schema: The Arrow type of the rows the writer takes: the table's columns in
            its order, as Spark would hand them to a write task. A task writes only rows
            it can give exactly this type without loss; the rest it yields as usual.
        faults: The executor failpoints armed in the driver (``failpoints.for_tasks``).
    """

    spec: WriteSpec
    row_schema: pa.Schema
    faults: Mapping[str, tuple[str, int]] = field(default_factory=dict)

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
    """The data files of one source task's rows (each of the plan's ``row_schema``).

    Args:
        plan: The batch's plan.
        task_id: The task's partition id (in the file names).
        attempt: The task's attempt number (in the file names).
    """

    def __init__(self, plan: SourceWritePlan, task_id: int, attempt: int) -> None:
        from sink.write.memory import PeakRssSampler
        from sink.write.split import ChunkBuffer
        from sink.write.task import DataTaskWriter

        # For as long as the writer is open: the failpoints, and the worker's peak memory.
        self._armed = contextlib.ExitStack()
        self._armed.enter_context(failpoints.armed_in_task(plan.faults))
        self._rss = self._armed.enter_context(PeakRssSampler())
        self._writer = DataTaskWriter(plan.spec, task_id, attempt)
        self._chunks = ChunkBuffer(self._writer.chunk_bytes)

    def write(self, rows: pa.Table) -> None:
        """Write ``rows``; chunks of the fanout's size go to the files as they fill."""
        try:
            for batch in rows.to_batches():
                chunk = self._chunks.add(batch)
                if chunk is not None:
                    self._writer.write_chunk(chunk)
        except Exception as e:
            raise self._writer.abort(e) from e

    def close(self) -> list[DataFileMessage]:
        """Finish the files; each one's message."""
        with self._armed:
            try:
                last = self._chunks.flush()
                if last is not None:
                    self._writer.write_chunk(last)
            except Exception as e:
                raise self._writer.abort(e) from e
            messages = self._writer.close()
            failpoints.hit("write.task")
            self._rss.sample()
            return [replace(m, task_peak_rss_bytes=self._rss.peak_bytes) for m in messages]

    def abort(self, cause: Exception) -> Exception:
        """Delete the files written so far; the error to raise for ``cause``."""
        with self._armed:
            return self._writer.abort(cause)
