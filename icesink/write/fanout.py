"""Keeps one rolling writer per partition value open at once, within a memory budget."""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa

from icesink.write.messages import DataFileMessage
from icesink.write.rolling import RollingFileWriter


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

    A caller that knows a partition value is complete (no more of its rows will come)
    says so with :meth:`finish`: its writer is then closed on a background thread while
    rows of other values keep arriving. The writers being finished hold at most a
    quarter of the budget; :meth:`finish` waits for the oldest ones beyond that.

    The messages of closed files can be taken while rows still arrive
    (:meth:`take_closed`), so that a task that closes many files sends them on instead of
    holding them until it ends; :meth:`result` has the rest.

    A failed close breaks the writer. A background close fails on its own thread, so
    its error is raised by the first call of :meth:`write`, :meth:`finish`,
    :meth:`close` or :meth:`result` after the failure (:meth:`close` waits for every
    background close: at the latest there), and again by every later one, so that no
    caller carries on as if the file had been written. Only :meth:`abort` is left,
    which deletes what the failed file left behind.

    Args:
        new_writer: Creates the rolling writer of a partition value.
        memory_budget_bytes: Most memory all open writers' buffered rows may hold together
            (Arrow bytes and a fixed cost per batch held: ``buffered_bytes()`` of the writers).
        close_threads: Writers closed concurrently by :meth:`close` and :meth:`finish`.
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
        # The open writers by what they hold, largest first and among equals the first
        # written to: (-buffered bytes, order, partition) as of a write. An entry whose
        # writer holds another amount by now is out of date (see _largest).
        self._by_size: list[tuple[int, int, Hashable]] = []
        self._order = itertools.count()
        self._finished: list[tuple[RollingFileWriter, Future[None]]] = []
        self._pending: deque[tuple[Future[None], int]] = deque()
        self._pending_bytes = 0
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        self._close_error: BaseException | None = None
        self._buffered = 0
        # Files closed whose messages were not taken, and the open writers that have them.
        self._closed_files = 0
        self._with_closed: dict[Hashable, RollingFileWriter] = {}
        self._taken_paths: list[str] = []  # to delete if the task fails after all
        self.budget_closes = 0
        self.budget_closed_bytes = 0
        self.open_writers_peak = 0
        self.buffered_bytes_peak = 0

    def write(self, partition: tuple[object, ...], batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Append rows that all belong to ``partition`` (``nbytes``: their Arrow size, if known).

        Raises:
            Exception: What a failed close raised (see the class docstring).
        """
        self._raise_close_error()
        writer = self._writers.get(partition)
        if writer is None:
            writer = self._new_writer(partition)
            self._writers[partition] = writer
            self.open_writers_peak = max(self.open_writers_peak, len(self._writers))
        before, files = writer.buffered_bytes(), writer.closed_files()
        writer.write(batch, nbytes)
        after = writer.buffered_bytes()
        self._buffered += after - before
        if after:
            self._push_size(partition, after)
        self._count_closed(partition, writer, files)
        self.buffered_bytes_peak = max(self.buffered_bytes_peak, self._buffered)
        if self._buffered > self._budget:
            self._enforce_budget()

    def _enforce_budget(self) -> None:
        while self._buffered > self._budget and (found := self._largest()) is not None:
            partition, largest = found
            freed, files = largest.buffered_bytes(), largest.closed_files()
            largest.close_current()
            # Last in line from now on (the map's order is the one a rebuilt _by_size
            # starts from): among writers holding as much, the oldest file is closed
            # first. Its rows are slices of the oldest chunks, whose buffers they keep
            # alive (a budget spread over thousands of one-row files would otherwise keep
            # an ever longer tail of old chunks).
            self._writers[partition] = self._writers.pop(partition)
            self._count_closed(partition, largest, files)
            self.budget_closes += 1
            self.budget_closed_bytes += freed
            self._buffered -= freed
        # Give what the closed files held back to the OS, so RSS follows the budget.
        pa.default_memory_pool().release_unused()

    def _push_size(self, partition: Hashable, held: int) -> None:
        heapq.heappush(self._by_size, (-held, next(self._order), partition))
        if len(self._by_size) > 2 * len(self._writers) + 64:  # mostly out of date: made again
            held_now = ((w.buffered_bytes(), p) for p, w in self._writers.items())
            self._by_size = [(-size, next(self._order), p) for size, p in held_now if size]
            heapq.heapify(self._by_size)

    def _largest(self) -> tuple[Hashable, RollingFileWriter] | None:
        """The open writer holding the most, the first written to among equals; ``None``
        when none holds anything. A heap, not a scan: a task over thousands of values
        closes thousands of files for the budget."""
        while self._by_size:  # (made again by _push_size at times: not held in a local)
            negative_held, _, partition = heapq.heappop(self._by_size)
            writer = self._writers.get(partition)
            held = writer.buffered_bytes() if writer is not None else 0
            if writer is not None and held == -negative_held:  # entries hold more than 0
                return partition, writer
            if held:  # it holds less since (a row group was written): in line with what it holds now
                self._push_size(partition, held)
        return None

    def _count_closed(self, partition: Hashable, writer: RollingFileWriter, files_before: int) -> None:
        closed = writer.closed_files() - files_before
        if closed:
            self._closed_files += closed
            self._with_closed[partition] = writer

    def finish(self, partitions: Iterable[tuple[object, ...]]) -> None:
        """Close the writers of complete partition values in the background.

        Rows of such a value that arrive later all the same go to a new writer (and file).

        Raises:
            Exception: What a failed close raised (see the class docstring).
        """
        self._raise_close_error()
        for partition in partitions:
            writer = self._writers.pop(partition, None)
            if writer is None:
                continue
            self._with_closed.pop(partition, None)  # taken as a finished writer's
            self._closed_files += 1
            nbytes = writer.buffered_bytes()
            self._buffered -= nbytes
            future = self._executor().submit(writer.close)
            future.add_done_callback(self._note_close_error)
            self._finished.append((writer, future))
            self._pending.append((future, nbytes))
            self._pending_bytes += nbytes
        while self._pending and (self._pending_bytes > self._budget // 4 or self._pending[0][0].done()):
            self._wait_oldest()

    def _executor(self) -> ThreadPoolExecutor:
        """The threads that close writers, for :meth:`finish` and :meth:`close` alike."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max(1, self._close_threads), thread_name_prefix="icesink-close")
        return self._pool

    def _wait_oldest(self) -> None:
        future, nbytes = self._pending.popleft()
        self._pending_bytes -= nbytes
        self._note_close_error(future)
        self._raise_close_error()

    def _note_close_error(self, future: Future[None]) -> None:
        """Keep the first error of a close (on the thread that ran it, or when waited for)."""
        if future.cancelled():  # by abort(): never started
            return
        error = future.exception()  # waits; the callback only runs once it is done
        if error is not None and self._close_error is None:
            self._close_error = error

    def _raise_close_error(self) -> None:
        if self._close_error is not None:
            raise self._close_error

    def buffered_bytes(self) -> int:
        """Memory the rows buffered by all open writers hold (kept as a running total)."""
        return self._buffered

    def open_writers(self) -> int:
        """Partition values with a writer."""
        return len(self._writers)

    def close(self) -> None:
        """Close every writer; safe to call twice.

        Raises:
            Exception: What a failed close raised, now or in an earlier call.
        """
        if self._closed:
            self._raise_close_error()
            return
        self._closed = True
        try:
            while self._pending:
                self._wait_oldest()
            # Largest first, so that the threads finish together.
            writers = sorted(self._writers.values(), key=lambda w: w.buffered_bytes(), reverse=True)
            if self._close_threads < 2 or len(writers) < 2:
                for writer in writers:
                    writer.close()
            else:
                for _ in self._executor().map(RollingFileWriter.close, writers):
                    pass
        except Exception as e:
            if self._close_error is None:
                self._close_error = e
            raise
        finally:
            self._shut_pool()

    def _shut_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def take_closed(self, at_least: int = 1) -> list[DataFileMessage]:
        """Messages of the files closed since the last call, once there are ``at_least`` of them.

        Fewer than that (or none) gives ``[]``, and they stay for a later call or
        :meth:`result`. Files still being closed in the background are left for later.

        Raises:
            Exception: What a failed close raised (see the class docstring).
        """
        self._raise_close_error()
        if self._closed_files < at_least:
            return []
        taken = [m for w in self._with_closed.values() for m in w.take_closed()]
        self._with_closed.clear()
        still_closing = []
        for writer, future in self._finished:
            if future.done():
                taken.extend(writer.take_closed())
            else:
                still_closing.append((writer, future))
        self._finished = still_closing
        self._closed_files = len(still_closing)
        self._taken_paths.extend(m.path for m in taken)
        self._raise_close_error()  # a background close that failed meanwhile
        return taken

    def result(self) -> list[DataFileMessage]:
        """Messages of every file written and not taken, by partition value."""
        if not self._closed:
            raise RuntimeError("result() before close()")
        self._raise_close_error()
        return [m for w in self._all_writers() for m in w.result()]

    def _all_writers(self) -> list[RollingFileWriter]:
        return [*(writer for writer, _ in self._finished), *self._writers.values()]

    def abort(self) -> list[str]:
        """Stop writing; delete open files and return the paths of files already closed."""
        self._closed = True
        self._shut_pool()  # lets running closes end; those not started never will
        self._pending.clear()
        closed_paths = list(self._taken_paths)
        for writer in self._all_writers():
            closed_paths.extend(m.path for m in writer.result_so_far())
            writer.abort()
        return closed_paths
