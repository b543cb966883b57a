"""How long a write task spent receiving its rows, and finishing its files after them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace

import pyarrow as pa

from icesink.write.messages import DataFileMessage


class TaskClock:
    """Times the two phases of a write task, measured inside the Python worker.

    * input: from the task's start until its last rows arrived. The rows are split and
      buffered as they come, so this is as long as Spark's side of the task takes to
      read and hand them over, or as the writer takes to take them, whichever is slower.
    * close: from then until the task's files were finished: encoding and writing what
      the writers still held, most of a task's Parquet encoding when its files are under
      the target size.

    A task whose time is mostly input is waiting on its input; one whose time is mostly
    close is bound by encoding, which more cores (or more write tasks) spread.
    """

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._input_end: float | None = None

    def reading(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` as they are; the input ends when they run out."""
        yield from batches
        self.input_ended()

    def input_ended(self) -> None:
        """The last rows have arrived (the first call counts)."""
        if self._input_end is None:
            self._input_end = time.monotonic()

    def stamped(self, messages: list[DataFileMessage], peak_rss_bytes: int) -> list[DataFileMessage]:
        """``messages`` with the task's peak memory and the seconds of its phases so far."""
        now = time.monotonic()
        input_end = now if self._input_end is None else self._input_end
        return [
            replace(
                m,
                task_peak_rss_bytes=peak_rss_bytes,
                task_input_seconds=input_end - self._start,
                task_close_seconds=now - input_end,
            )
            for m in messages
        ]
