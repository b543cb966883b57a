"""The one writer lifecycle every data-file writer follows.

:class:`~icesink.write.parquet.ParquetFileWriter` (one file) and
:class:`~icesink.write.rolling.RollingFileWriter` (files of one partition value) declare it
as their base, so the type checker holds them to it;
:class:`~icesink.write.fanout.FanoutWriter` keeps one such writer per partition value.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import pyarrow as pa

R_co = TypeVar("R_co", covariant=True)


class FileWriter(Protocol[R_co]):
    """``write(batch)`` any number of times, ``close()`` (safe twice), then ``result()``.

    ``length_bytes()`` is the writer's best estimate of what it has put on storage so
    far, including rows still buffered (estimated at their compressed size).
    """

    def write(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Append rows (``nbytes``: their Arrow size, when the caller knows it)."""
        ...

    def length_bytes(self) -> int:
        """Estimated bytes on storage, buffered rows included."""
        ...

    def buffered_bytes(self) -> int:
        """Bytes held in memory, not yet on storage."""
        ...

    def close(self) -> None:
        """Flush and finish; calling it again does nothing."""
        ...

    def result(self) -> R_co:
        """What was written; only after :meth:`close`."""
        ...

    def abort(self) -> None:
        """Stop and delete the file being written, if any (after a failure)."""
        ...
