"""Driver-side commit of an upsert batch: new data files and position deletes in ONE snapshot.

Iceberg Java calls this a RowDelta. The snapshot's operation is ``overwrite``; its
summary carries the ledger's sink id and batch ids, and the ledger's marker is set in the
same atomic update, so a replayed batch is recognised and never deletes twice.

Before every attempt the table is refreshed and checked from the snapshot the batch's
lookup started on (:mod:`icesink.upsert.validate`): if a concurrent commit removed a data
file the deletes point at, added deletes to one, or added a data file holding a row of
one of the batch's keys (another writer inserted or changed the same key: committing
would store it twice), the commit refuses with a retryable
:class:`~icesink.errors.RowDeltaConflictError` naming the files: the caller redoes the lookup
on the current snapshot and commits again. Any other concurrent commit (rows of other
keys, a compaction of files the deletes do not point at) only makes the catalog refuse
the attempt; the snapshot is then rebuilt on the new metadata and committed again, with
backoff.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation

from icesink import failpoints
from icesink.commit import ledger, metadata_cache
from icesink.commit.backoff import Backoff
from icesink.commit.ledger import BatchRange
from icesink.commit.snapshot import SnapshotProducer, require_format_v2
from icesink.config import CommitConfig
from icesink.errors import CommitConflictError, CommitError, RowDeltaConflictError
from icesink.upsert.validate import ConcurrentKeys, KeyCheck, conflicting_data_files
from icesink.write.manifest_entry import data_file_from_message, encoded_entry
from icesink.write.messages import CONTENT_POSITION_DELETES, DataFileMessage
from icesink.write.position_deletes import FILE_PATH_FIELD_ID

if TYPE_CHECKING:
    from icesink.upsert.key_index_lookup import IndexCommit

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowDeltaOutcome:
    """What a row delta commit did.

    Attributes:
        snapshot_id: The new snapshot (``None`` when the batch was already committed).
        attempts: Commit attempts made.
        conflicts: Attempts the catalog refused because of a concurrent commit.
        skipped_replay: The batches were found already committed.
        key_check: What the last attempt's check of the batch's keys against concurrent
            commits read (``None``: not checked).
    """

    snapshot_id: int | None
    attempts: int
    conflicts: int
    skipped_replay: bool = False
    key_check: KeyCheck | None = None


class RowDeltaCommitter:
    """Commits upsert batches of one sink to one table (format v2), exactly once.

    Args:
        table: The table (refreshed as needed).
        sink_id: The sink's identity in the ledger.
        config: Retry settings (``commit.retry.*``).
        sleep: Waits between attempts (``time.sleep`` by default).
    """

    def __init__(
        self,
        table: Table,
        sink_id: str,
        config: CommitConfig,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        require_format_v2(table)
        self.table = table
        self._sink_id = sink_id
        self._backoff = Backoff(config, sleep)
        self._index: IndexCommit | None = None

    def commit(
        self,
        data_files: Sequence[DataFileMessage],
        delete_files: Sequence[DataFileMessage],
        start_snapshot_id: int | None,
        batches: BatchRange,
        attempts: Mapping[int, str],
        keys: ConcurrentKeys | None = None,
        index: IndexCommit | None = None,
    ) -> RowDeltaOutcome:
        """Commit ``data_files`` and ``delete_files`` as the data of ``batches``.

        Args:
            data_files: New row versions (content data).
            delete_files: Position deletes of the rows they replace or delete (each lists
                the data files it refers to, as the lookup writes them).
            start_snapshot_id: The snapshot the lookup planned from.
            batches: The micro-batches committed.
            attempts: Each batch's write attempt (for the ledger).
            keys: Every key the batch changes, checked against the data files committed
                since ``start_snapshot_id`` (``None``: not checked).
            index: The key index of the new snapshot, committed with it when the table
                has not moved on since the lookup (``None``: no index).

        Raises:
            RowDeltaConflictError: A concurrent commit removed, or added deletes to, a
                referenced data file, or added rows of one of ``keys`` (retryable: redo
                the lookup).
            CommitConflictError: The catalog kept refusing after every retry.
            CommitError: The commit failed otherwise; its outcome may be unknown.
        """
        referenced = referenced_data_files(delete_files)
        producer = SnapshotProducer(
            self.table,
            Operation.OVERWRITE,
            snapshot_properties=ledger.summary_properties(self._sink_id, batches, attempts),
            table_properties=ledger.marker_properties(self._sink_id, batches, attempts.get(batches.last, "")),
        )
        for message in [*data_files, *delete_files]:
            producer.add_file(data_file_from_message(message), encoded_entry(message))
        self._index = index
        try:
            return self._commit_with_retries(producer, referenced, start_snapshot_id, batches, keys)
        except (RowDeltaConflictError, CommitConflictError):
            producer.clean_up()  # certainly not committed; any other failure keeps what may be referenced
            if index is not None:
                index.discard()
            raise

    def _commit_with_retries(
        self,
        producer: SnapshotProducer,
        referenced: set[str],
        start_snapshot_id: int | None,
        batches: BatchRange,
        keys: ConcurrentKeys | None,
    ) -> RowDeltaOutcome:
        for attempt_no in self._backoff.attempts():
            conflicts = attempt_no - 1  # every earlier attempt was refused by the catalog
            metadata_cache.refresh(self.table)
            if self.table.metadata.snapshot_by_id(producer.snapshot_id) is not None:
                # An earlier attempt landed although the catalog's answer was lost.
                if self._index is not None:
                    self._index.landed()
                return RowDeltaOutcome(producer.snapshot_id, attempt_no, conflicts)
            if ledger.is_committed(self.table, self._sink_id, batches.last):
                logger.info(
                    "batches %s of sink %s already committed to %s; not committing again",
                    batches,
                    self._sink_id,
                    self._name,
                )
                producer.clean_up()
                if self._index is not None:
                    self._index.discard()
                return RowDeltaOutcome(None, attempt_no, conflicts, skipped_replay=True)
            self._validate(referenced, start_snapshot_id, batches)
            key_check = self._validate_keys(keys, start_snapshot_id, batches)
            if self._try_commit(producer, batches, attempt_no):
                return RowDeltaOutcome(producer.snapshot_id, attempt_no, conflicts, key_check=key_check)
        raise CommitConflictError(
            f"row delta still conflicting after {self._backoff.tries} attempts",
            table=self._name,
            batches=str(batches),
            sink_id=self._sink_id,
            hint="raise commit.retry.num-retries or reduce the number of concurrent writers",
        )

    def _try_commit(self, producer: SnapshotProducer, batches: BatchRange, attempt_no: int) -> bool:
        """One attempt on the refreshed table: ``False`` when the catalog refused it."""
        pending = producer.build(self.table.metadata)
        extra = self._index.updates(self.table.metadata, producer.snapshot_id) if self._index else ()
        failpoints.hit("commit.before")
        try:
            metadata_cache.commit(self.table, (*pending.updates, *extra), pending.requirements)
        except CommitFailedException as e:
            logger.warning(
                "row delta of batches %s (sink %s, table %s) conflicted (attempt %s of %s): %s",
                batches,
                self._sink_id,
                self._name,
                attempt_no,
                self._backoff.tries,
                e,
            )
            return False
        except Exception as e:
            raise CommitError(
                f"row delta commit failed with an unknown outcome: {type(e).__name__}: {e}",
                table=self._name,
                batches=str(batches),
                sink_id=self._sink_id,
                hint="the batch will be checked against the table when Spark replays it",
            ) from e
        producer.clean_up(keep=pending.files)
        if self._index is not None:
            self._index.done(committed_with_index=bool(extra))
        logger.info(
            "committed batches %s (sink %s) to %s as row delta snapshot %s: %s",
            batches,
            self._sink_id,
            self._name,
            producer.snapshot_id,
            pending.snapshot.summary.additional_properties if pending.snapshot.summary else {},
        )
        return True

    def _validate(self, referenced: set[str], start_snapshot_id: int | None, batches: BatchRange) -> None:
        conflicting = conflicting_data_files(
            self.table.metadata, self.table.io, start_snapshot_id, referenced
        )
        if conflicting:
            files = tuple(sorted(conflicting))
            raise RowDeltaConflictError(
                f"{len(files)} data files the batch's position deletes point at were removed or "
                f"got new deletes since snapshot {start_snapshot_id}: {list(files[:5])}",
                files=files,
                table=self._name,
                batches=str(batches),
                sink_id=self._sink_id,
                hint="look the keys of these files up again in the current snapshot and commit again",
            )

    def _validate_keys(
        self, keys: ConcurrentKeys | None, start_snapshot_id: int | None, batches: BatchRange
    ) -> KeyCheck | None:
        if keys is None:
            return None
        check = keys.check(self.table.metadata, start_snapshot_id)
        if check.snapshots:
            logger.info(
                "batches %s of sink %s: %s snapshots committed to %s since %s added %s data files; "
                "%s read by key, %s found holding keys of the batch",
                batches,
                self._sink_id,
                check.snapshots,
                self._name,
                start_snapshot_id,
                check.files_added,
                check.files_read,
                check.files_with_keys,
            )
        if check.history_lost:
            raise RowDeltaConflictError(
                f"the lookup's snapshot {start_snapshot_id} is no longer an ancestor of the table's "
                "current snapshot (rolled back or expired): concurrent rows of the batch's keys "
                "cannot be ruled out",
                table=self._name,
                batches=str(batches),
                sink_id=self._sink_id,
                hint="look the batch's keys up again in the current snapshot and commit again",
            )
        if check.files:
            raise RowDeltaConflictError(
                f"data file {check.files[0]} committed since snapshot {start_snapshot_id} holds rows of "
                "keys the batch changes, which its lookup did not see",
                files=check.files,
                table=self._name,
                batches=str(batches),
                sink_id=self._sink_id,
                hint="look the batch's keys up again in the current snapshot and commit again",
            )
        return check

    @property
    def _name(self) -> str:
        return ".".join(self.table.name())


def referenced_data_files(delete_files: Iterable[DataFileMessage]) -> set[str]:
    """The data files position delete files point at (their ``referenced_files``, else equal path bounds)."""
    paths: set[str] = set()
    for message in delete_files:
        if message.content != CONTENT_POSITION_DELETES:
            raise ValueError(f"{message.path} is not a position delete file")
        if message.referenced_files:
            paths.update(message.referenced_files)
            continue
        lower = message.lower_bounds.get(FILE_PATH_FIELD_ID)
        if lower is None or lower != message.upper_bounds.get(FILE_PATH_FIELD_ID):
            raise ValueError(f"{message.path} names neither its data files nor one data file by its bounds")
        paths.add(lower.decode())
    return paths


def delete_uncommitted(table: Table, files: Iterable[DataFileMessage]) -> None:
    """Delete files that no commit references (delete files of a lookup that must be redone)."""
    for message in files:
        with contextlib.suppress(FileNotFoundError):
            table.io.delete(message.path)
