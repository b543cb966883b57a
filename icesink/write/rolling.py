"""Rolls to a new data file when the current one reaches the target size on disk."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeAlias

import pyarrow as pa

from icesink.write.messages import DataFileMessage
from icesink.write.parquet import CompressionEstimator, ParquetFileWriter
from icesink.write.protocol import FileWriter

# A batch that would overshoot the target by more than this fraction is split, and a file
# this close under the target is closed: it has reached it.
SPLIT_TOLERANCE = 0.02

Finisher: TypeAlias = Callable[[DataFileMessage], DataFileMessage]
"""What becomes of a file's message as the file closes (see :class:`RollingFileWriter`)."""


class RollingFileWriter(FileWriter[list[DataFileMessage]]):
    """Writes one partition value's rows into files of about ``target_file_size_bytes``.

    An incoming batch that would carry the current file past its target is split at
    the row where the estimated on-disk size reaches it, so files land close to the
    target rather than one Arrow batch above it.

    Args:
        new_file: Creates the next file writer.
        target_file_size_bytes: On-disk size at which a file is closed.
        estimator: The task's compression estimator (bytes on disk per Arrow byte).
        finish: Applied to each file's message as the file closes, on the thread that
            closes it: what is kept until the message is taken (its manifest entry
            encoded, for one, which makes it a quarter of the size).
    """

    def __init__(
        self,
        new_file: Callable[[], ParquetFileWriter],
        target_file_size_bytes: int,
        estimator: CompressionEstimator,
        finish: Finisher | None = None,
    ) -> None:
        self._new_file = new_file
        self._target = target_file_size_bytes
        self._estimator = estimator
        self._finish = finish
        self._current: ParquetFileWriter | None = None
        self._results: list[DataFileMessage] = []
        self._closed = False

    def write(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Append rows, rolling to new files as the target is reached.

        ``nbytes`` is the batch's Arrow size when the caller knows it (``batch.nbytes``
        walks every buffer of a slice, which costs more than the rest of a small write).
        """
        rows = batch.num_rows
        arrow_per_row = (batch.nbytes if nbytes is None else nbytes) / max(rows, 1)
        offset = 0
        while offset < rows:
            if self._current is None:
                self._current = self._new_file()
            take = self._rows_that_fit(rows - offset, arrow_per_row)
            piece = batch if take == rows else batch.slice(offset, take)
            self._current.write(piece, int(take * arrow_per_row))
            offset += take
            if self._current.length_bytes() >= self._target * (1 - SPLIT_TOLERANCE):
                self.close_current()

    def _rows_that_fit(self, rows: int, arrow_per_row: float) -> int:
        """Rows of the next piece: up to the target, and at most about one row group.

        Writing a large batch a row group at a time lets each flushed row group correct
        the compression estimate before the next piece's fit is decided; the first batch
        of a task would otherwise be sized with the initial guess alone.
        """
        assert self._current is not None
        room = self._target - self._current.length_bytes()
        disk_per_row = arrow_per_row * self._estimator.ratio
        if disk_per_row <= 0:
            return rows
        group = max(1, int(self._current.row_group_size_bytes / disk_per_row))
        if rows * disk_per_row <= room * (1 + SPLIT_TOLERANCE):
            return min(rows, group)
        return max(1, min(rows, group, int(room / disk_per_row)))

    def close_current(self) -> None:
        """Close the open file (if any); the next write starts a new one."""
        if self._current is None:
            return
        current, self._current = self._current, None
        try:
            current.close()
        except BaseException:
            with contextlib.suppress(Exception):
                current.abort()  # delete what reached storage; the close's error is the one to see
            raise
        message = current.result()
        if message is not None:
            self._results.append(message)  # kept as it is if finishing fails: abort() deletes its file
            if self._finish is not None:
                self._results[-1] = self._finish(message)

    def length_bytes(self) -> int:
        """Estimated on-disk bytes of the open file."""
        return self._current.length_bytes() if self._current else 0

    def buffered_bytes(self) -> int:
        """Memory the open file's buffered rows hold (see ParquetFileWriter.buffered_bytes)."""
        return self._current.buffered_bytes() if self._current else 0

    def close(self) -> None:
        """Close the open file; safe to call twice."""
        if not self._closed:
            self._closed = True
            self.close_current()

    def result(self) -> list[DataFileMessage]:
        """Messages of every file written and not taken (:meth:`take_closed`), in order."""
        if not self._closed:
            raise RuntimeError("result() before close()")
        return list(self._results)

    def result_so_far(self) -> list[DataFileMessage]:
        """Messages of the files closed so far and not taken (for cleanup after a failure)."""
        return list(self._results)

    def closed_files(self) -> int:
        """Files closed and not taken yet."""
        return len(self._results)

    def take_closed(self) -> list[DataFileMessage]:
        """Messages of the files closed so far and not taken before; this writer forgets them."""
        taken, self._results = self._results, []
        return taken

    def abort(self) -> None:
        """Delete the open file; closed files are the caller's to delete (see result_so_far)."""
        self._closed = True
        if self._current is not None:
            self._current.abort()
            self._current = None
