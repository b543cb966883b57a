"""Executor side of a write: one Spark task, run through ``mapInArrow``.

Built from a small picklable :class:`~icesink.write.spec.WriteSpec`; opens the file system lazily inside
the task; never touches the catalog; yields one JSON message per data file written, as
the files close (:data:`~icesink.write.task_fanout.MESSAGES_PER_YIELD` at a time while rows
still arrive), and last the task's report.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from icesink import failpoints
from icesink.errors import StorageError, WriteError
from icesink.write.allocator import use_write_pool
from icesink.write.arrow_input import InputWidth, byte_check_skipped
from icesink.write.layout import BucketLayout
from icesink.write.memory import PeakRssSampler
from icesink.write.messages import (
    MESSAGE_DDL,
    DataFileMessage,
    RowCounts,
    TaskReport,
    WriteResult,
    messages_to_arrow,
)
from icesink.write.preload import preloading
from icesink.write.spec import WriteSpec
from icesink.write.split import arrow_bytes, split_by_key
from icesink.write.table_files import TableFiles
from icesink.write.task_clock import TaskClock
from icesink.write.task_fanout import TaskFanout, in_parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

ArrowFunction = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""A ``mapInArrow`` function."""


def run_write(
    df: DataFrame,
    spec: WriteSpec,
    *,
    in_driver: bool = False,
    collected: pa.Table | None = None,
    before: ArrowFunction | None = None,
    row_bytes: int = 0,
) -> WriteResult:
    """Write ``df`` (one Spark job); every file written, and the rows received and dropped.

    By default in Spark's executors. With ``in_driver`` (small batches only), ``df`` is
    collected as Arrow, a job without Python workers, and written from this process by
    the same writer as a task's (``collected``: ``df``'s rows, already in the driver). With
    ``before``, each task writes what ``before`` makes of its rows instead of the rows.
    ``row_bytes``: the widest rows the sink's previous write received
    (:func:`~icesink.write.arrow_input.byte_check_skipped`).
    """
    if in_driver:
        if before is not None:
            raise ValueError("a batch written in the driver has no tasks to run 'before' in")
        writer = DataTaskWriter(spec, task_id=0, attempt=0)
        rows = collected if collected is not None else df.toArrow()
        files = writer.write_all(iter(rows.to_batches()))
        report = writer.report
        counts = RowCounts(report.input_rows, report.bad_rows)
        return WriteResult(files, counts, frozenset(report.source_partitions))
    if before is None:  # mapInArrow resolves every column by name: names with dots or backticks fail
        df = df.toDF(*[f"_{i}" for i in range(len(df.columns))])  # the task reads columns by position
    with byte_check_skipped(df.sparkSession, row_bytes):
        rows = df.mapInArrow(write_function(spec, before), MESSAGE_DDL).collect()
    return WriteResult.from_json(row[0] for row in rows)


def write_function(spec: WriteSpec, before: ArrowFunction | None = None) -> ArrowFunction:
    """The function to hand to ``DataFrame.mapInArrow`` (output schema: ``MESSAGE_SCHEMA``)."""
    return task_function(functools.partial(DataTaskWriter, spec), before)


class TaskWriter(Protocol):
    """What a write task runs: every file of its rows, and the rows it received and dropped."""

    @property
    def report(self) -> TaskReport: ...

    def stream(self, batches: Iterator[pa.RecordBatch]) -> Iterator[list[DataFileMessage]]:
        """Write every batch, giving the messages of the files closed as they close, the last
        ones once the batches have run out."""
        ...


def task_function(
    make_writer: Callable[[int, int], TaskWriter], before: ArrowFunction | None = None
) -> ArrowFunction:
    """A ``mapInArrow`` function writing each task's rows with ``make_writer(task id, attempt)``."""
    faults = failpoints.for_tasks()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        use_write_pool()  # before the first rows are read: they are allocated from it
        width = InputWidth()
        batches = width.reading(batches)  # as Spark sends them (its byte check: arrow_input)
        if before is not None:
            batches = before(batches)
        batches = preloading(batches)
        from pyspark import TaskContext

        context = TaskContext.get()
        task_id = context.partitionId() if context else 0
        attempt = context.attemptNumber() if context else 0
        writer = make_writer(task_id, attempt)
        clock = TaskClock()
        with PeakRssSampler() as rss, failpoints.armed_in_task(faults):
            for messages in writer.stream(clock.reading(batches)):
                yield messages_to_arrow(clock.stamped(messages, rss.peak_bytes))
            failpoints.hit("write.task")
        yield messages_to_arrow([], dataclasses.replace(writer.report, input_row_bytes=width.row_bytes))

    return run


class DataTaskWriter:
    """Writes the rows of one task through a fanout of rolling Parquet writers."""

    def __init__(self, spec: WriteSpec, task_id: int, attempt: int) -> None:
        self._spec = spec
        self._task_id = task_id
        self._files = TableFiles(spec, task_id, attempt)
        self._output = TaskFanout(self._files.new_rolling_writer, spec.memory_budget_bytes, task_id)
        self._storage_failed = False  # an OSError of the file system, not of the input
        self._rows = RowTally(task_id, source_column=spec.source_partition_column)
        self._buckets = _BucketSequence(spec.sequential_buckets)

    @property
    def report(self) -> TaskReport:
        """The rows received and dropped as bad so far (all of them after :meth:`write_all`)."""
        return self._rows.report

    def write_all(self, batches: Iterator[pa.RecordBatch]) -> list[DataFileMessage]:
        """Write every batch; the messages of every file (see :meth:`stream`)."""
        return [m for messages in self.stream(batches) for m in messages]

    def stream(self, batches: Iterator[pa.RecordBatch]) -> Iterator[list[DataFileMessage]]:
        """Write every batch, giving the messages of files as they close
        (:meth:`~icesink.write.task_fanout.TaskFanout.while_writing`), the rest once the batches
        have run out. On failure delete every file written (those already given too) and
        raise :class:`WriteError`."""
        yield from self._output.while_writing(batches, self.write_chunk, self.abort)
        yield from in_parts(self.close())

    def write_chunk(self, received: pa.RecordBatch) -> None:
        """Write one chunk of rows (of about the fanout's chunk size); on failure call :meth:`abort`."""
        try:
            self._write_chunk(received)
        except OSError:
            self._storage_failed = True  # the input's own errors are raised where it is read
            raise

    def _write_chunk(self, received: pa.RecordBatch) -> None:
        n = self._spec.num_data_columns
        # The file schema is built at the first rows (a task without rows never needs it).
        width = len(self._files.arrow_schema)
        flag = width if self._spec.bad_row_flag else None
        batch = self._rows.without_bad_rows(self._rows.received(received), flag)
        if batch.num_rows == 0:
            return
        rows = self._files.to_file_batch([batch.column(i) for i in range(width)])
        if self._files.key_functions is None:
            keys = [batch.column(i) for i in range(n, batch.num_columns)]
        else:
            keys = [key(rows) for key in self._files.key_functions]
        bytes_per_row = arrow_bytes(rows) / rows.num_rows
        for key, part in split_by_key(keys, rows):
            partition = self._files.partition_record(key)
            self._output.fanout.write(partition, part, int(part.num_rows * bytes_per_row))
            self._buckets.wrote(key, partition)
        self._output.fanout.finish(self._buckets.complete(keys))

    def close(self) -> list[DataFileMessage]:
        """Finish every file; the messages of those not given yet. On failure, as :meth:`stream`."""
        self._storage_failed = True  # closing files: an OSError is the file system's
        messages = self._output.close(self.abort)
        logger.info(
            "task %s wrote %s files, %s rows (table=%s prefix=%s)",
            self._task_id,
            self._output.files,
            self._output.rows,
            self._spec.table,
            self._spec.file_prefix,
        )
        return messages

    def abort(self, cause: Exception) -> WriteError | StorageError:
        """Delete every file written so far; the error to raise for ``cause`` (``ICESINK-STORAGE`` when
        the storage failed: the driver names the server)."""
        for path in self._output.fanout.abort():
            self._files.io.delete(path)
        error = StorageError if isinstance(cause, OSError) and self._storage_failed else WriteError
        return error(
            f"writing data files failed: {type(cause).__name__}: {cause}",
            table=self._spec.table,
            task=self._task_id,
            file_prefix=self._spec.file_prefix,
        )


class RowTally:
    """The rows a task received, the Spark partitions they came from, and the bad rows dropped.

    Args:
        task_id: The task's Spark partition id.
        source_column: Each received batch ends with the column of the batch's Spark
            partition each row came from (``WriteSpec.source_partition_column``).
    """

    def __init__(self, task_id: int, *, source_column: bool = False) -> None:
        self._task_id = task_id
        self._source_column = source_column
        self._sources: set[int] = set()
        self._input_rows = 0
        self._bad_rows = 0

    @property
    def report(self) -> TaskReport:
        sources = tuple(sorted(self._sources)[:2])  # two already say "more than one"
        return TaskReport(self._task_id, self._input_rows, self._bad_rows, sources)

    def received(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` counted, without its source-partition column (noted) when it has one."""
        self._input_rows += batch.num_rows
        if not self._source_column:
            return batch
        last = batch.num_columns - 1
        if batch.num_rows and len(self._sources) < 2:
            bounds = pc.min_max(batch.column(last))
            self._sources.update((bounds["min"].as_py(), bounds["max"].as_py()))
        return pa.RecordBatch.from_arrays(batch.columns[:last], schema=batch.schema.remove(last))

    def without_bad_rows(self, batch: pa.RecordBatch, flag_column: int | None) -> pa.RecordBatch:
        """``batch`` (counted by :meth:`received`) without the rows its boolean ``flag_column``
        flags (none without one), counted."""
        if flag_column is None:
            return batch
        flag = batch.column(flag_column)
        bad = flag.true_count
        if bad == 0:
            return batch
        self._bad_rows += bad
        return batch.filter(pc.invert(flag))


class _BucketSequence:
    """Which partition values are complete, when the input is whole bucket partitions in a row.

    A task that reads several partitions of the bucket shuffle reads them one after the
    other, so once a row of a later bucket partition has arrived, every partition value
    of the earlier ones is complete. Without a layout, nothing is ever complete early.
    """

    def __init__(self, layout: BucketLayout | None) -> None:
        self._layout = layout
        self._open: dict[int, set[tuple[Any, ...]]] = {}

    def wrote(self, key: tuple[Any, ...], partition: tuple[Any, ...]) -> None:
        """Rows of ``key`` (raw partition values) went to the writer of ``partition``."""
        if self._layout is not None:
            self._open.setdefault(self._layout.partition_of(key), set()).add(partition)

    def complete(self, keys: list[pa.Array]) -> list[tuple[Any, ...]]:
        """The partitions complete after a chunk with these key columns (in input order)."""
        if self._layout is None or not keys:
            return []
        current = self._layout.partition_of(tuple(column[-1].as_py() for column in keys))
        done = [pid for pid in self._open if pid != current]
        return [partition for pid in done for partition in self._open.pop(pid)]
