"""A write task's fanout: sized from the task's memory budget, and the messages of its files.

The task splits its input a chunk at a time and hands the pieces to one
:class:`~icesink.write.fanout.FanoutWriter`; what the chunks in flight hold is taken from
the budget before the writers get the rest. The messages of the fanout's files go on as
the files close, carrying the task's peaks, and a task whose budget closed its files while
they were tiny says so.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import replace

import pyarrow as pa

from icesink.write.fanout import FanoutWriter
from icesink.write.messages import DataFileMessage
from icesink.write.parquet import COMPACT_PIECES
from icesink.write.rolling import RollingFileWriter
from icesink.write.split import chunked

logger = logging.getLogger(__name__)

# Incoming rows are split by partition value this many Arrow bytes at a time (see chunked()).
CHUNK_BYTES = 16 * 1024 * 1024
# Chunks are at most this small a share of the memory budget.
CHUNKS_PER_BUDGET = 32
# Chunks' worth of memory a task holds beyond what its writers buffer: the batches being
# merged into the next chunk and that chunk, its copy sorted by value, and the copies
# the writers make when they merge their pieces. A piece is a slice of its chunk's sorted
# copy, so every writer holds a piece of each of the last COMPACT_PIECES chunks and
# merges them in the same chunk as the others: those copies exist, for a moment, next
# to the chunks they come from. The writers' budget is what is left of the task's.
CHUNKS_IN_FLIGHT = COMPACT_PIECES + 3
# Files a task encodes at once when it ends (see FanoutWriter).
CLOSE_THREADS = 2
# A task that closes files while its rows still arrive sends their messages on once it
# has this many, rather than holding them until it ends: a task closing tens of
# thousands of files (many partition values, a small budget) then holds at most this many.
MESSAGES_PER_YIELD = 256
# A file closed by the memory budget with less than this buffered says the budget is
# spread over too many open writers (many partition values per task): files come out
# tiny, and the task logs a warning naming what to change.
SMALL_BUDGET_CLOSE_BYTES = 256 * 1024


class TaskFanout:
    """A task's fanout, sized from its memory budget, and the messages of its files.

    The writer hands it the task's input and a function writing one chunk of rows to
    :attr:`fanout`; it gives the messages of the files closed while rows still arrive,
    then the rest, each with the task's id and peaks, and counts them.
    """

    def __init__(
        self,
        new_writer: Callable[[tuple[object, ...]], RollingFileWriter],
        memory_budget_bytes: int,
        task_id: int,
    ) -> None:
        threads = min(CLOSE_THREADS, os.cpu_count() or 1)
        self.chunk_bytes = min(CHUNK_BYTES, memory_budget_bytes // CHUNKS_PER_BUDGET)
        writers_budget = memory_budget_bytes - CHUNKS_IN_FLIGHT * self.chunk_bytes
        self.fanout = FanoutWriter(new_writer, writers_budget, close_threads=threads)
        self.task_id = task_id
        self.files = 0
        self.rows = 0

    def while_writing(
        self,
        batches: Iterator[pa.RecordBatch],
        write_chunk: Callable[[pa.RecordBatch], None],
        abort: Callable[[Exception], Exception],
    ) -> Iterator[list[DataFileMessage]]:
        """Write ``batches`` a chunk at a time with ``write_chunk``, giving the messages of the
        files closed meanwhile, once there are :data:`MESSAGES_PER_YIELD` of them, that many
        at most at a time (a chunk may close thousands: their JSON is then never all held
        at once). On failure raise ``abort(error)``, which deletes every file written
        (those already given too)."""
        try:
            for received in chunked(batches, self.chunk_bytes):
                write_chunk(received)
                yield from in_parts(self._messages(self.fanout.take_closed(MESSAGES_PER_YIELD)))
        except Exception as e:
            raise abort(e) from e

    def close(self, abort: Callable[[Exception], Exception]) -> list[DataFileMessage]:
        """Finish every file; the messages of those not given yet. On failure raise ``abort(error)``."""
        try:
            self.fanout.close()
            messages = self._messages(self.fanout.result())
        except Exception as e:
            raise abort(e) from e
        warn_if_budget_too_small(self.fanout, self.task_id)
        return messages

    def _messages(self, closed: list[DataFileMessage]) -> list[DataFileMessage]:
        fanout = self.fanout
        messages = [
            replace(
                m,
                task_id=self.task_id,
                open_writers_peak=fanout.open_writers_peak,
                buffered_bytes_peak=fanout.buffered_bytes_peak,
            )
            for m in closed
        ]
        self.files += len(messages)
        self.rows += sum(m.record_count for m in messages)
        return messages


def in_parts(messages: list[DataFileMessage]) -> Iterator[list[DataFileMessage]]:
    """``messages`` :data:`MESSAGES_PER_YIELD` at a time (none at all for none), each part
    encoded and sent on before the next, so that the JSON of a task's last thousands of
    files is never all held."""
    for start in range(0, len(messages), MESSAGES_PER_YIELD):
        yield messages[start : start + MESSAGES_PER_YIELD]


def warn_if_budget_too_small(fanout: FanoutWriter, task_id: int) -> None:
    """Log a warning when the task's memory budget closed its files while they were still tiny."""
    if fanout.budget_closes == 0:
        return
    average = fanout.budget_closed_bytes // fanout.budget_closes
    if average >= SMALL_BUDGET_CLOSE_BYTES:
        return
    logger.warning(
        "task %s: the memory budget closed %s files holding %s KiB on average, with up to "
        "%s partition values open at once: write.fanout.memory-budget-bytes is too small for "
        "that many values in one task, and the files come out tiny. Raise it, or set "
        "write.distribution-mode=hash (or bucket) so that each task sees fewer values.",
        task_id,
        fanout.budget_closes,
        average // 1024,
        fanout.open_writers_peak,
    )
