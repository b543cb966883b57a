"""Attempt records: which batch attempts wrote files, so a crash leaves nothing behind.

Before its executors write, a batch attempt leaves a small JSON record in the table's
metadata folder (``metadata/icesink-attempts/<sink id>/``); the record is removed once
the attempt's files are committed or deleted. A record still there when the sink next
starts belongs to an attempt that crashed. Its files are deleted when they are proven
unreferenced: the batch was never committed, or the ledger shows it was committed by
another attempt. Otherwise they are reported and kept.
"""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import asdict, dataclass

from pyiceberg.io import FileIO
from pyiceberg.table import Table

from sink._pyiceberg import list_files
from sink.commit import ledger

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AttemptRecord:
    """One batch attempt that is writing (or crashed while writing) data files."""

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


class AttemptLog:
    """Reads and writes attempt records of one sink on one table.

    Args:
        io: The table's FileIO.
        table_location: The table's location.
        sink_id: The sink whose attempts these are.
    """

    def __init__(self, io: FileIO, table_location: str, sink_id: str) -> None:
        self._io = io
        self._sink_id = sink_id
        self._folder = f"{table_location.rstrip('/')}/metadata/icesink-attempts/{sink_id}"

    def _path(self, batch_id: int, attempt: str) -> str:
        return f"{self._folder}/{batch_id:012d}-{attempt}.json"

    def begin(self, record: AttemptRecord) -> None:
        """Record an attempt before any of its files is written."""
        with self._io.new_output(self._path(record.batch_id, record.attempt)).create(overwrite=True) as out:
            out.write(json.dumps(asdict(record)).encode())

    def end(self, batch_id: int, attempt: str) -> None:
        """Forget an attempt whose files are committed or deleted."""
        with contextlib.suppress(FileNotFoundError):
            self._io.delete(self._path(batch_id, attempt))

    def open_attempts(self) -> list[AttemptRecord]:
        """Attempts recorded and not yet ended."""
        records = []
        for path in list_files(self._io, self._folder):
            if path.endswith(".json"):
                with self._io.new_input(path).open() as stream:
                    records.append(AttemptRecord(**json.loads(stream.read())))
        return sorted(records, key=lambda r: r.batch_id)

    def recover(self, table: Table, staged_attempts: frozenset[str] = frozenset()) -> RecoveryReport:
        """Settle every open attempt against the table's ledger (see module docstring).

        Args:
            table: The table, freshly loaded.
            staged_attempts: Attempts whose files are staged for a later commit: kept.
        """
        deleted: list[str] = []
        kept: list[str] = []
        attempts = self.open_attempts()
        for record in attempts:
            files = [
                path
                for path in list_files(self._io, record.data_location)
                if path.rsplit("/", 1)[-1].startswith(record.file_prefix + "-")
            ]
            committed_by = ledger.attempt_of_batch(table, self._sink_id, record.batch_id)
            never_committed = not ledger.is_committed(table, self._sink_id, record.batch_id)
            if committed_by == record.attempt or record.attempt in staged_attempts:
                pass  # the crash came after the commit (or staging): the files are the table's
            elif never_committed or committed_by is not None:
                for path in files:
                    self._io.delete(path)
                deleted.extend(files)
                logger.warning(
                    "deleted %s unreferenced files of crashed attempt %s of batch %s (sink %s, table %s)",
                    len(files),
                    record.attempt,
                    record.batch_id,
                    self._sink_id,
                    ".".join(table.name()),
                )
            else:
                kept.extend(files)
                logger.warning(
                    "kept %s files of crashed attempt %s of batch %s (sink %s): the batch is committed but "
                    "its snapshot has expired, so they cannot be proven unreferenced; "
                    "remove_orphan_files() will delete them if no snapshot references them",
                    len(files),
                    record.attempt,
                    record.batch_id,
                    self._sink_id,
                )
            self.end(record.batch_id, record.attempt)
        return RecoveryReport(tuple(deleted), tuple(kept), len(attempts))
