"""The one writer lifecycle every data-file writer follows."""

from __future__ import annotations

from typing import Protocol, TypeVar

import pyarrow as pa

R_co = TypeVar("R_co", covariant=True)


class FileWriter(Protocol[R_co]):
    """``write(batch)`` any number of times, ``close()`` (safe twice), then ``result()``.

    ``length_bytes()`` is the writer's best estimate of what it has put on storage so
    far, including rows still buffered (estimated at their compressed size).
    """

    def write(self, batch: pa.RecordBatch) -> None:
        """Append rows."""
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
