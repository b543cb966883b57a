"""Keeps one rolling writer per partition value open at once, within a memory budget."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from sink.write.messages import DataFileMessage
from sink.write.rolling import RollingFileWriter


class FanoutWriter:
    """Routes each partition value's rows to its own :class:`RollingFileWriter`.

    Unlike a clustered writer, rows of a partition value need not arrive together:
    every value keeps its writer open. When the buffered bytes of all open writers
    exceed ``memory_budget_bytes``, the largest open file is closed into a complete
    data file (never dropped); its partition simply continues in a new file.

    Closing encodes whatever the writers still buffer, which for a task under the target
    file size is nearly all of its rows. Spark's side of the task has finished by then,
    so ``close_threads`` writers are closed at once (pyarrow encodes and compresses
    without holding the GIL).

    Args:
        new_writer: Creates the rolling writer of a partition value.
        memory_budget_bytes: Most Arrow bytes all open writers may buffer together.
        close_threads: Writers closed concurrently by :meth:`close`.
    """

    def __init__(
        self,
        new_writer: Callable[[tuple[object, ...]], RollingFileWriter],
        memory_budget_bytes: int,
        close_threads: int = 1,
    ) -> None:
        self._new_writer = new_writer
        self._budget = memory_budget_bytes
        self._close_threads = close_threads
        self._writers: dict[Hashable, RollingFileWriter] = {}
        self._closed = False
        self._buffered = 0
        self.budget_closes = 0
        self.open_writers_peak = 0
        self.buffered_bytes_peak = 0

    def write(self, partition: tuple[object, ...], batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Append rows that all belong to ``partition`` (``nbytes``: their Arrow size, if known)."""
        writer = self._writers.get(partition)
        if writer is None:
            writer = self._new_writer(partition)
            self._writers[partition] = writer
            self.open_writers_peak = max(self.open_writers_peak, len(self._writers))
        before = writer.buffered_bytes()
        writer.write(batch, nbytes)
        self._buffered += writer.buffered_bytes() - before
        self.buffered_bytes_peak = max(self.buffered_bytes_peak, self._buffered)
        if self._buffered > self._budget:
            self._enforce_budget()

    def _enforce_budget(self) -> None:
        while self._buffered > self._budget:
            largest = max(self._writers.values(), key=lambda w: w.buffered_bytes())
            freed = largest.buffered_bytes()
            if freed == 0:
                break
            largest.close_current()
            self.budget_closes += 1
            self._buffered -= freed
        # Give what the closed files held back to the OS, so RSS follows the budget.
        pa.default_memory_pool().release_unused()

    def buffered_bytes(self) -> int:
        """Arrow bytes buffered by all open writers (kept as a running total)."""
        return self._buffered

    def open_writers(self) -> int:
        """Partition values with a writer."""
        return len(self._writers)

    def close(self) -> None:
        """Close every writer; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        # Largest first, so that the threads finish together.
        writers = sorted(self._writers.values(), key=lambda w: w.buffered_bytes(), reverse=True)
        if self._close_threads < 2 or len(writers) < 2:
            for writer in writers:
                writer.close()
            return
        with ThreadPoolExecutor(self._close_threads, thread_name_prefix="icesink-close") as pool:
            for _ in pool.map(RollingFileWriter.close, writers):
                pass

    def result(self) -> list[DataFileMessage]:
        """Messages of every file written, by partition value."""
        if not self._closed:
            raise RuntimeError("result() before close()")
        return [m for w in self._writers.values() for m in w.result()]

    def abort(self) -> list[str]:
        """Stop writing; delete open files and return the paths of files already closed."""
        self._closed = True
        closed_paths: list[str] = []
        for writer in self._writers.values():
            closed_paths.extend(m.path for m in writer.result_so_far())
            writer.abort()
        return closed_paths
