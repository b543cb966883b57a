"""Durable staging of batches written but not yet committed.

With a commit cadence (``commit.target-bytes``, ``commit.interval-s``,
``commit.max-batches``) a batch's data files are kept here, and committed later
together with other batches. The file list of a staged batch is persisted in the
sink's state folder (``<state-location>/<table>/<sink id>/staged/``, see
:mod:`icesink.commit.state`) before ``foreachBatch`` returns, so a crash loses nothing:
the restarted sink loads the staged batches back, checks that their files still exist,
and commits them exactly once with its next commit. A staged batch counts as done for
the replay check.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyiceberg.io import FileIO
from pyiceberg.table import Table

from icesink._pyiceberg import file_exists
from icesink.commit import ledger
from icesink.commit.state import STAGED, StateFolder, migrate_legacy, state_folder
from icesink.config import SinkConfig
from icesink.errors import CommitError
from icesink.write.messages import DataFileMessage


@dataclass(frozen=True)
class StagedBatch:
    """One micro-batch's data files, durable but not yet in a snapshot.

    Attributes:
        batch_id: The micro-batch.
        attempt: The batch attempt that wrote the files.
        files: The data files.
        staged_at: When the batch was staged (seconds since the epoch).
        location: The folder under which the attempt wrote every file (empty for
            batches staged by earlier versions, whose files share the data folder).
        delete_files: Upsert mode: the position deletes of the rows the batch replaces,
            written by its lookup into the attempt's folder.
        keys: Upsert mode: every key the batch changes, an Arrow IPC stream in base64
            (:func:`icesink.write.messages.encode_keys`); empty in append mode.
        snapshot_id: Upsert mode: the snapshot the batch's lookup started on.
    """

    batch_id: int
    attempt: str
    files: tuple[DataFileMessage, ...]
    staged_at: float = field(default_factory=time.time)
    location: str = ""
    delete_files: tuple[DataFileMessage, ...] = ()
    keys: str = ""
    snapshot_id: int | None = None

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
                "location": self.location,
                # Each file's own keys are left out (a batch's worth of them, again): a staged
                # batch read back takes them from its files when the key index needs them.
                "files": [replace(f, keys="").to_json() for f in self.files],
                **self._upsert_json(),
            }
        )

    def _upsert_json(self) -> dict[str, object]:
        if not self.keys:
            return {}
        return {
            "delete_files": [f.to_json() for f in self.delete_files],
            "keys": self.keys,
            "snapshot_id": self.snapshot_id,
        }

    @classmethod
    def from_json(cls, text: str) -> StagedBatch:
        data = json.loads(text)
        return cls(
            batch_id=data["batch_id"],
            attempt=data["attempt"],
            staged_at=data["staged_at"],
            files=tuple(DataFileMessage.from_json(f) for f in data["files"]),
            location=data.get("location", ""),
            delete_files=tuple(DataFileMessage.from_json(f) for f in data.get("delete_files", ())),
            keys=data.get("keys", ""),
            snapshot_id=data.get("snapshot_id"),
        )


class StagingArea:
    """Staged batches of one sink on one table: in memory, and durable in the sink's state folder.

    Args:
        folder: Where the staged records go.
        data_io: The table's FileIO, to check that staged files still exist.
        migrate: Moves records of earlier versions into ``folder`` (run by the first :meth:`load`).
        committed: Whether the ledger has a batch id as committed. The files of a batch
            committed by another attempt may be deleted before its staged record is: such
            a batch is not checked on load (the sink forgets it).
    """

    def __init__(
        self,
        folder: StateFolder,
        data_io: FileIO,
        migrate: Callable[[], int] | None = None,
        committed: Callable[[int], bool] | None = None,
    ) -> None:
        self._folder = folder
        self._data_io = data_io
        self._migrate = migrate
        self._committed = committed or (lambda batch_id: False)
        self.batches: list[StagedBatch] = []

    @classmethod
    def for_sink(cls, config: SinkConfig, table: Table, sink_id: str) -> StagingArea:
        """The staging area of ``sink_id`` on ``table``, in the state location of ``config``."""
        folder = state_folder(config, table, sink_id, STAGED)
        migrate = functools.partial(migrate_legacy, table, sink_id, STAGED, folder)
        return cls(folder, table.io, migrate, functools.partial(ledger.is_committed, table, sink_id))

    @staticmethod
    def _name(batch_id: int) -> str:
        return f"{batch_id:012d}.json"

    def stage(self, batch: StagedBatch) -> None:
        """Persist ``batch`` and hold it for the next commit."""
        self._folder.write(self._name(batch.batch_id), batch.to_json().encode())
        self.batches.append(batch)

    def restage(self, batch: StagedBatch) -> None:
        """Persist ``batch`` in place of the staged batch of its id (an upsert's lookup redone)."""
        self._folder.write(self._name(batch.batch_id), batch.to_json().encode())
        self.batches = [batch if b.batch_id == batch.batch_id else b for b in self.batches]

    def load(self) -> list[StagedBatch]:
        """Read the batches staged on storage (after a restart) into memory, by batch id.

        Raises:
            CommitError: A staged batch's data file is missing from storage: committing
                it would make a snapshot that no reader can scan.
        """
        if self._migrate is not None:
            self._migrate()
            self._migrate = None
        loaded = [StagedBatch.from_json(self._folder.read(path).decode()) for path in self._folder.records()]
        for batch in loaded:
            if not self._committed(batch.batch_id):
                self._check_files_exist(batch)
        self.batches = sorted(loaded, key=lambda b: b.batch_id)
        return list(self.batches)

    def _check_files_exist(self, batch: StagedBatch) -> None:
        files = [*batch.files, *batch.delete_files]
        missing = [f.path for f in files if not file_exists(self._data_io, f.path)]
        if missing:
            raise CommitError(
                f"{len(missing)} of the {len(files)} data and delete files of staged batch {batch.batch_id} "
                f"are missing, e.g. {missing[0]!r}",
                batch_id=batch.batch_id,
                path=self._folder.path(self._name(batch.batch_id)),
                hint="restore the files, or delete the staged record (its rows are lost) and replay "
                "the batch from a checkpoint taken before it",
            )

    def remove(self, batches: list[StagedBatch]) -> None:
        """Forget batches that are committed (or proven already committed)."""
        ids = {b.batch_id for b in batches}
        self.batches = [b for b in self.batches if b.batch_id not in ids]
        for batch_id in ids:
            self._folder.delete(self._name(batch_id))

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
