"""Durable staging of batches written but not yet committed.

With a commit cadence (``commit.target-bytes``, ``commit.interval-s``,
``commit.max-batches``) a batch's data files are kept here, and committed later
together with other batches. The file list of a staged batch is persisted in the
table's metadata folder (``metadata/icesink-staged/<sink id>/``) before
``foreachBatch`` returns, so a crash loses nothing: the restarted sink loads the staged
batches back and commits them exactly once with its next commit. A staged batch
counts as done for the replay check.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass, field

from pyiceberg.io import FileIO

from sink._pyiceberg import list_files
from sink.write.messages import DataFileMessage


@dataclass(frozen=True)
class StagedBatch:
    """One micro-batch's data files, durable but not yet in a snapshot."""

    batch_id: int
    attempt: str
    files: tuple[DataFileMessage, ...]
    staged_at: float = field(default_factory=time.time)

    @property
    def size_bytes(self) -> int:
        """Bytes of data files."""
        return sum(f.file_size_bytes for f in self.files)

    def to_json(self) -> str:
        return json.dumps(
            {
                "batch_id": self.batch_id,
                "attempt": self.attempt,
                "staged_at": self.staged_at,
                "files": [f.to_json() for f in self.files],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> StagedBatch:
        data = json.loads(text)
        return cls(
            batch_id=data["batch_id"],
            attempt=data["attempt"],
            staged_at=data["staged_at"],
            files=tuple(DataFileMessage.from_json(f) for f in data["files"]),
        )


class StagingArea:
    """Staged batches of one sink on one table: in memory, and durable on storage.

    Args:
        io: The table's FileIO.
        table_location: The table's location.
        sink_id: The sink whose batches these are.
    """

    def __init__(self, io: FileIO, table_location: str, sink_id: str) -> None:
        self._io = io
        self._folder = f"{table_location.rstrip('/')}/metadata/icesink-staged/{sink_id}"
        self.batches: list[StagedBatch] = []

    def _path(self, batch_id: int) -> str:
        return f"{self._folder}/{batch_id:012d}.json"

    def stage(self, batch: StagedBatch) -> None:
        """Persist ``batch`` and hold it for the next commit."""
        with self._io.new_output(self._path(batch.batch_id)).create(overwrite=True) as out:
            out.write(batch.to_json().encode())
        self.batches.append(batch)

    def load(self) -> list[StagedBatch]:
        """Read the batches staged on storage (after a restart) into memory, by batch id."""
        loaded = []
        for path in list_files(self._io, self._folder):
            if path.endswith(".json"):
                with self._io.new_input(path).open() as stream:
                    loaded.append(StagedBatch.from_json(stream.read().decode()))
        self.batches = sorted(loaded, key=lambda b: b.batch_id)
        return list(self.batches)

    def remove(self, batches: list[StagedBatch]) -> None:
        """Forget batches that are committed (or proven already committed)."""
        ids = {b.batch_id for b in batches}
        self.batches = [b for b in self.batches if b.batch_id not in ids]
        for batch_id in ids:
            with contextlib.suppress(FileNotFoundError):
                self._io.delete(self._path(batch_id))

    def contains(self, batch_id: int) -> bool:
        """Whether ``batch_id`` is staged."""
        return any(b.batch_id == batch_id for b in self.batches)

    @property
    def size_bytes(self) -> int:
        """Bytes of all staged data files."""
        return sum(b.size_bytes for b in self.batches)

    @property
    def files(self) -> list[DataFileMessage]:
        """All staged data files, in batch order."""
        return [f for b in self.batches for f in b.files]

    @property
    def oldest_staged_at(self) -> float | None:
        """When the oldest staged batch was staged."""
        return min((b.staged_at for b in self.batches), default=None)
