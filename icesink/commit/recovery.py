"""Attempt records: which batch attempts wrote files, so a crash leaves nothing behind.

Every file of a batch attempt is written under a folder of its own,
``<data location>/<attempt prefix>/<partition path>/<file>`` (:func:`attempt_location`),
so the files of one attempt are one prefix listing away, however large the table.
Before its executors write, a batch attempt leaves a small JSON record in the sink's
state folder (``<state-location>/<table>/<sink id>/attempts/``, see
:mod:`icesink.commit.state`); the record is removed once the attempt's files are committed,
staged or deleted. A record still there when the sink next starts belongs to an attempt
that crashed. Its files are settled against the ledger:

- the batch was never committed, or was committed by another attempt: every file of
  the attempt is unreferenced (its paths are the attempt's own) and deleted;
- the attempt itself committed the batch: the files its snapshot took are the table's;
  the others (left by failed or retried Spark tasks) are deleted;
- otherwise (the batch is committed, but its snapshot has expired) they are kept and
  reported: ``remove_orphan_files()`` decides later.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass

from pyiceberg.io import FileIO
from pyiceberg.table import Table

from icesink._pyiceberg import list_files
from icesink.commit import ledger
from icesink.commit.state import ATTEMPTS, StateFolder, migrate_legacy, state_folder
from icesink.config import SinkConfig

logger = logging.getLogger(__name__)


def attempt_location(data_location: str, file_prefix: str) -> str:
    """The folder under which a batch attempt with ``file_prefix`` writes every data file."""
    return f"{data_location.rstrip('/')}/{file_prefix}"


@dataclass(frozen=True)
class AttemptRecord:
    """One batch attempt that is writing (or crashed while writing) data files.

    Attributes:
        sink_id: The sink.
        batch_id: The micro-batch.
        attempt: The batch attempt's id.
        file_prefix: Start of the name of every file of the attempt.
        data_location: The folder holding every file of the attempt (see
            :func:`attempt_location`; the table's data folder for records of earlier versions).
    """

    sink_id: str
    batch_id: int
    attempt: str
    file_prefix: str
    data_location: str


@dataclass(frozen=True)
class RecoveryReport:
    """What recovery found.

    Attributes:
        deleted_files: Files of crashed attempts, proven unreferenced and deleted.
        kept_files: Files of crashed attempts whose fate could not be proven, kept.
        attempts: Crashed attempts found.
    """

    deleted_files: tuple[str, ...] = ()
    kept_files: tuple[str, ...] = ()
    attempts: int = 0


def attempt_files(io: FileIO, location: str, file_prefix: str) -> list[str]:
    """Every data file of one attempt: one listing of the attempt's own folder."""
    return [p for p in list_files(io, location) if p.rsplit("/", 1)[-1].startswith(file_prefix + "-")]


def delete_leftovers(io: FileIO, location: str, file_prefix: str, referenced: Collection[str]) -> list[str]:
    """Delete the files of an attempt that its commit did not take (failed or retried tasks).

    Returns:
        The files deleted.
    """
    taken = set(referenced)
    leftovers = [p for p in attempt_files(io, location, file_prefix) if p not in taken]
    for path in leftovers:
        io.delete(path)
    return leftovers


class AttemptLog:
    """Reads and writes attempt records of one sink on one table.

    Args:
        folder: Where the records go (the sink's state folder for attempts).
        data_io: The table's FileIO, for its data files.
        sink_id: The sink whose attempts these are.
        migrate: Moves records of earlier versions into ``folder`` (run by :meth:`recover`).
    """

    def __init__(
        self, folder: StateFolder, data_io: FileIO, sink_id: str, migrate: Callable[[], int] | None = None
    ) -> None:
        self._folder = folder
        self._data_io = data_io
        self._sink_id = sink_id
        self._migrate = migrate

    @classmethod
    def for_sink(cls, config: SinkConfig, table: Table, sink_id: str) -> AttemptLog:
        """The attempt log of ``sink_id`` on ``table``, in the state location of ``config``."""
        folder = state_folder(config, table, sink_id, ATTEMPTS)
        migrate = functools.partial(migrate_legacy, table, sink_id, ATTEMPTS, folder)
        return cls(folder, table.io, sink_id, migrate)

    @staticmethod
    def _name(batch_id: int, attempt: str) -> str:
        return f"{batch_id:012d}-{attempt}.json"

    def begin(self, record: AttemptRecord) -> None:
        """Record an attempt before any of its files is written."""
        self._folder.write(self._name(record.batch_id, record.attempt), json.dumps(asdict(record)).encode())

    def end(self, batch_id: int, attempt: str) -> None:
        """Forget an attempt whose files are committed, staged or deleted."""
        self._folder.delete(self._name(batch_id, attempt))

    def open_attempts(self) -> list[AttemptRecord]:
        """Attempts recorded and not yet ended."""
        records = [AttemptRecord(**json.loads(self._folder.read(path))) for path in self._folder.records()]
        return sorted(records, key=lambda r: r.batch_id)

    def recover(self, table: Table, staged_attempts: frozenset[str] = frozenset()) -> RecoveryReport:
        """Settle every open attempt against the table's ledger (see module docstring).

        Storage requests: a listing of the records, and per crashed attempt one read of
        its record, one listing of its own folder and one delete per file, plus the
        manifests its own snapshot added when it committed; never a listing of the table.

        Args:
            table: The table, freshly loaded.
            staged_attempts: Attempts whose files are staged for a later commit: kept.
        """
        if self._migrate is not None:
            self._migrate()
            self._migrate = None
        deleted: list[str] = []
        kept: list[str] = []
        attempts = self.open_attempts()
        for record in attempts:
            gone, left = self._settle(table, record, staged_attempts)
            deleted.extend(gone)
            kept.extend(left)
            self.end(record.batch_id, record.attempt)
        return RecoveryReport(tuple(deleted), tuple(kept), len(attempts))

    def _settle(
        self, table: Table, record: AttemptRecord, staged_attempts: frozenset[str]
    ) -> tuple[list[str], list[str]]:
        """The files of one crashed attempt: (deleted, kept)."""
        io, name = self._data_io, ".".join(table.name())
        if record.attempt in staged_attempts:
            return [], []  # the staged record accounts for the files; its commit cleans up
        committed_by = ledger.attempt_of_batch(table, self._sink_id, record.batch_id)
        if committed_by == record.attempt:
            # The crash came after the commit: keep what the commit took, delete the rest.
            taken = ledger.committed_files(table, self._sink_id, record.batch_id, record.attempt)
            if taken is None:
                return [], []  # its snapshot has expired: remove_orphan_files() decides
            return delete_leftovers(io, record.data_location, record.file_prefix, taken), []
        files = attempt_files(io, record.data_location, record.file_prefix)
        if not ledger.is_committed(table, self._sink_id, record.batch_id) or committed_by:
            for path in files:
                io.delete(path)
            logger.warning(
                "deleted %s unreferenced files of crashed attempt %s of batch %s (sink %s, table %s)",
                len(files),
                record.attempt,
                record.batch_id,
                self._sink_id,
                name,
            )
            return files, []
        logger.warning(
            "kept %s files of crashed attempt %s of batch %s (sink %s, table %s): the batch is committed "
            "but its snapshot has expired, so they cannot be proven unreferenced; "
            "remove_orphan_files() will delete them if no snapshot references them",
            len(files),
            record.attempt,
            record.batch_id,
            self._sink_id,
            name,
        )
        return [], files
