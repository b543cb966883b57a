"""Executor side of a routed write: one Spark task writing the rows of many tables.

The input is the routed projection (:mod:`icesink.destinations.projection`): column 0 the
row's destination index, column 1 its bad-row flag, then the value slots. Each
destination reads its table's columns from its own slots, in its table's order. A task
splits every chunk by destination, computes the partition values itself
(``partition_values_in_task``) and writes through ONE fanout shared by every destination,
keyed by ``(destination, partition value)``: the memory budget is the task's, however many
tables its rows go to. Each file message names its table.

When the rows come from a routed bucket shuffle read in fewer tasks than it has partitions
(:mod:`icesink.route.routed_shuffle`, :attr:`RoutedWriteSpec.sequential`), each task reads
whole (table, bucket) partitions one after the other: once a row of another (table,
bucket) arrives, the files of the earlier ones are finished (encoded and closed in the
background), so the task holds about one bucket's writers at a time.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyiceberg.io import FileIO

from icesink.errors import WriteError
from icesink.write.arrow_input import byte_check_skipped
from icesink.write.messages import MESSAGE_DDL, DataFileMessage, TaskReport, WriteResult
from icesink.write.rolling import RollingFileWriter
from icesink.write.spec import WriteSpec
from icesink.write.split import arrow_bytes, split_by_key
from icesink.write.table_files import TableFiles
from icesink.write.task import ArrowFunction, RowTally, task_function
from icesink.write.task_fanout import TaskFanout, in_parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

DEST_INDEX_COLUMN = 0
BAD_ROW_COLUMN = 1
FIRST_SLOT = 2


@dataclass(frozen=True)
class DestinationSpec:
    """One destination of a routed write.

    Attributes:
        index: The destination index rows carry in column 0.
        spec: The table's write spec (partition values computed in the task).
        slots: Input column positions of the table's columns, in the table's order.
    """

    index: int
    spec: WriteSpec
    slots: tuple[int, ...]


@dataclass(frozen=True)
class RoutedWriteSpec:
    """Everything a routed write task needs (picklable).

    Attributes:
        destinations: The tables the batch's rows go to.
        memory_budget_bytes: Most memory the rows buffered by the task's open writers may
            hold, all tables together.
        sequential: The input is whole partitions of a routed bucket shuffle, one after the
            other; each destination's ``spec.sequential_buckets`` is its bucket layout
            (``None``: the table's rows are one unit).
    """

    destinations: tuple[DestinationSpec, ...]
    memory_budget_bytes: int
    sequential: bool = False


def run_routed_write(df: DataFrame, spec: RoutedWriteSpec, row_bytes: int = 0) -> WriteResult:
    """Write the routed projection ``df`` to every destination in ONE Spark job.

    ``row_bytes``: the widest rows the sink's previous write received
    (:func:`~icesink.write.arrow_input.byte_check_skipped`).
    """
    df = df.toDF(*[f"_{i}" for i in range(len(df.columns))])  # the task reads columns by position
    with byte_check_skipped(df.sparkSession, row_bytes):
        rows = df.mapInArrow(routed_write_function(spec), MESSAGE_DDL).collect()
    return WriteResult.from_json(row[0] for row in rows)


def routed_write_function(spec: RoutedWriteSpec) -> ArrowFunction:
    """The function to hand to ``DataFrame.mapInArrow``."""
    return task_function(functools.partial(RoutedTaskWriter, spec))


class RoutedTaskWriter:
    """Writes the rows of one task to their destinations' tables through one shared fanout."""

    def __init__(self, spec: RoutedWriteSpec, task_id: int, attempt: int) -> None:
        self._task_id = task_id
        self._attempt = attempt
        self._destinations = {d.index: d for d in spec.destinations}
        self._tables: dict[int, TableFiles] = {}  # built on a destination's first rows in this task
        self._output = TaskFanout(self._new_writer, spec.memory_budget_bytes, task_id)
        self._rows = RowTally(task_id)
        self._units = _UnitSequence(spec.sequential)

    @property
    def report(self) -> TaskReport:
        """The rows received and dropped as bad (or unroutable) so far."""
        return self._rows.report

    def stream(self, batches: Iterator[pa.RecordBatch]) -> Iterator[list[DataFileMessage]]:
        """Write every batch, giving the messages of files as they close (as
        :meth:`icesink.write.task.DataTaskWriter.stream`); on failure delete every file
        written and raise :class:`WriteError`."""
        yield from self._output.while_writing(batches, self.write_chunk, self.abort)
        yield from in_parts(self.close())

    def write_chunk(self, received: pa.RecordBatch) -> None:
        """Write one chunk of rows, each to its destination; on failure call :meth:`abort`."""
        batch = self._rows.without_bad_rows(self._rows.received(received), BAD_ROW_COLUMN)
        for (index,), part in split_by_key([batch.column(DEST_INDEX_COLUMN)], batch):
            self.write_destination(int(index), part)
        if self._units.active and batch.num_rows:
            self._output.fanout.finish(self._units.complete(self._unit_of(batch.slice(batch.num_rows - 1))))

    def write_destination(self, index: int, part: pa.RecordBatch) -> None:
        """Write rows of destination ``index`` (its columns at its slots); on failure call :meth:`abort`."""
        files = self._files(index)
        rows = files.to_file_batch([part.column(i) for i in self._destinations[index].slots])
        keys = [key(rows) for key in files.key_functions or ()]
        bytes_per_row = arrow_bytes(rows) / rows.num_rows
        for key, piece in split_by_key(keys, rows):
            partition = (index, *files.partition_record(key))
            self._output.fanout.write(partition, piece, int(piece.num_rows * bytes_per_row))
            self._units.wrote((index, self._bucket_of(index, key)), partition)

    def close(self) -> list[DataFileMessage]:
        """Finish every file; the messages of those not given yet, each naming its table."""
        messages = self._output.close(self.abort)
        logger.info(
            "task %s wrote %s files, %s rows, to %s tables",
            self._task_id,
            self._output.files,
            self._output.rows,
            len(self._tables),
        )
        return messages

    def abort(self, cause: Exception) -> WriteError:
        """Delete every file written so far; the error to raise for ``cause``."""
        for path in self._output.fanout.abort():
            self._io_of(path).delete(path)
        return WriteError(
            f"writing routed data files failed: {type(cause).__name__}: {cause}", task=self._task_id
        )

    def _files(self, index: int) -> TableFiles:
        files = self._tables.get(index)
        if files is None:
            files = self._tables[index] = TableFiles(
                self._destinations[index].spec, self._task_id, self._attempt
            )
        return files

    def _bucket_of(self, index: int, key: tuple[Any, ...]) -> int:
        """The partition of ``key`` (raw partition values) in its table's bucket layout (0 without one)."""
        layout = self._destinations[index].spec.sequential_buckets
        return layout.partition_of(key) if layout is not None and self._units.active else 0

    def _unit_of(self, last: pa.RecordBatch) -> tuple[int, int]:
        """The (destination, bucket) of a one-row batch of the input."""
        index = int(last.column(DEST_INDEX_COLUMN)[0].as_py())
        files = self._files(index)
        rows = files.to_file_batch([last.column(i) for i in self._destinations[index].slots])
        key = tuple(k(rows)[0].as_py() for k in files.key_functions or ())
        return index, self._bucket_of(index, key)

    def _new_writer(self, key: tuple[object, ...]) -> RollingFileWriter:
        index = key[0]
        assert isinstance(index, int)
        return self._files(index).new_rolling_writer(key[1:])

    def _io_of(self, path: str) -> FileIO:
        for files in self._tables.values():
            if path.startswith(files.spec.data_location.rstrip("/") + "/"):
                return files.io
        return next(iter(self._tables.values())).io


class _UnitSequence:
    """Which partition values are complete, when the input is whole (table, bucket) partitions in a row.

    Without ``active``, nothing is ever complete early.
    """

    def __init__(self, active: bool) -> None:
        self.active = active
        self._open: dict[tuple[int, int], set[tuple[object, ...]]] = {}

    def wrote(self, unit: tuple[int, int], partition: tuple[object, ...]) -> None:
        """Rows of (destination, bucket) ``unit`` went to the writer of ``partition``."""
        if self.active:
            self._open.setdefault(unit, set()).add(partition)

    def complete(self, current: tuple[int, int]) -> list[tuple[object, ...]]:
        """The partitions complete once the input has reached ``current``."""
        done = [unit for unit in self._open if unit != current]
        return [partition for unit in done for partition in self._open.pop(unit)]
