"""Driver-side commit: one atomic snapshot per commit, retried on conflicts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update import AssertTableUUID, SetPropertiesUpdate

from icesink import failpoints
from icesink.commit import ledger, metadata_cache
from icesink.commit.backoff import Backoff
from icesink.commit.ledger import BatchRange
from icesink.commit.recovery import delete_leftovers
from icesink.commit.snapshot import SnapshotProducer
from icesink.commit.staging import StagedBatch
from icesink.config import CommitConfig
from icesink.errors import CommitConflictError, CommitError
from icesink.log_context import batch_logger
from icesink.pause_gc import paused_gc
from icesink.write.manifest_entry import data_file_from_message, encoded_entry
from icesink.write.messages import DataFileMessage

logger = batch_logger(__name__)


@dataclass(frozen=True)
class CommitOutcome:
    """What a commit did.

    Attributes:
        snapshot_id: The new snapshot, or ``None`` when nothing was committed.
        attempts: Commit attempts made (1 when there was no conflict).
        conflicts: Attempts that lost a race with a concurrent writer.
        skipped_replay: The batches were found already committed.
        discarded_files: Files proven unreferenced and deleted: those of batches another
            attempt committed, and those of failed task attempts the commit did not take.
    """

    snapshot_id: int | None
    attempts: int
    conflicts: int
    skipped_replay: bool = False
    discarded_files: tuple[str, ...] = ()


class Committer:
    """Commits data files of a sink's batches to one table, exactly once.

    The snapshot and the replay marker (see :mod:`icesink.commit.ledger`) are one atomic
    commit. Before every attempt the table is refreshed and the ledger checked again:
    batches another attempt (or process) committed meanwhile are left out, and their
    files are deleted only when the ledger names a different committing attempt (each
    attempt's files have paths of their own). A conflict is retried with exponential
    backoff, by this loop only: each attempt builds its snapshot from the refreshed
    metadata and commits it in one catalog call (:meth:`_commit_once`).
    A commit that finally gives up keeps every file a staged record may need; only the
    files of batches that are not staged durably are deleted (every attempt was refused,
    so no snapshot references them).

    Args:
        table: The table (refreshed as needed).
        sink_id: The sink's identity in the ledger.
        config: Retry settings.
        delete_file: Deletes a data file by path (the table's FileIO by default).
        sleep: Waits between attempts (``time.sleep`` by default).
    """

    def __init__(
        self,
        table: Table,
        sink_id: str,
        config: CommitConfig,
        delete_file: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        self.table = table
        self._sink_id = sink_id
        self._config = config
        self._backoff = Backoff(config, sleep)
        self._delete_file = delete_file or table.io.delete

    def commit(
        self, files: Sequence[DataFileMessage], batches: BatchRange, attempts: Mapping[int, str]
    ) -> CommitOutcome:
        """Commit ``files``, written by the attempt ``attempts[batches.last]``, as the data of ``batches``.

        The files are not staged durably: a commit that gives up deletes them.

        Raises:
            CommitConflictError: Still conflicting after every retry (files deleted).
            CommitError: The commit failed for another reason; its outcome may be unknown,
                so the files are kept for the replay to decide.
        """
        batch = StagedBatch(batches.last, attempts.get(batches.last, ""), tuple(files))
        return self.commit_batches([batch], batches, durable=False)

    def commit_batches(
        self, staged: Sequence[StagedBatch], batches: BatchRange, *, durable: bool = True
    ) -> CommitOutcome:
        """Commit the files of ``staged`` as the data of ``batches`` (which may end with empty batches).

        Args:
            staged: The batches with files, each with the attempt that wrote them.
            batches: The batch range the commit covers (recorded in the ledger).
            durable: Whether ``staged`` is kept in durable staged records: then a commit
                that gives up deletes nothing, for the next commit to retry.

        Raises:
            CommitConflictError: Still conflicting after every retry.
            CommitError: The commit failed for another reason; its outcome may be unknown,
                so the files are kept for the ledger to decide later.
        """
        conflicts = 0
        pending = list(staged)
        for attempt_no in self._backoff.attempts():
            metadata_cache.refresh(self.table)
            record = ledger.last_commit(self.table, self._sink_id)
            last = -1 if record is None else record.last_batch_id
            done = [b for b in staged if b.batch_id <= last]
            if batches.last <= last:
                logger.info(
                    "batches %s of sink %s already committed to %s; not committing again",
                    batches,
                    self._sink_id,
                    self._name,
                )
                return CommitOutcome(None, attempt_no, conflicts, True, self._settle_committed(done))
            pending = [b for b in staged if b.batch_id > last]
            todo = BatchRange(max(batches.first, last + 1), batches.last)
            try:
                snapshot_id = self._commit_once(pending, todo)
            except CommitFailedException as e:
                conflicts += 1
                self._log_conflict(todo, attempt_no, e)
                continue
            except Exception as e:
                raise CommitError(
                    f"commit failed with an unknown outcome: {type(e).__name__}: {e}",
                    table=self._name,
                    batches=str(todo),
                    sink_id=self._sink_id,
                    hint="the ledger decides when the batches are committed again or replayed",
                ) from e
            self._log_committed(pending, todo, snapshot_id)
            discarded = self._settle_committed(done) + self._delete_leftovers(pending)
            return CommitOutcome(snapshot_id, attempt_no, conflicts, discarded_files=discarded)
        return self._give_up(pending, batches, durable)

    def _log_committed(
        self, staged: Sequence[StagedBatch], batches: BatchRange, snapshot_id: int | None
    ) -> None:
        logger.info(
            "committed %s files of batches %s (sink %s) to %s as snapshot %s",
            sum(len(b.files) for b in staged),
            batches,
            self._sink_id,
            self._name,
            snapshot_id,
        )

    def _give_up(self, staged: Sequence[StagedBatch], batches: BatchRange, durable: bool) -> CommitOutcome:
        files = [f for b in staged for f in b.files]
        if durable:
            fate = f"its {len(files)} data files stay staged for the next commit"
        else:
            self.delete_files(files)  # every attempt was refused: no snapshot references them
            fate = f"its {len(files)} data files were deleted"
        raise CommitConflictError(
            f"commit still conflicting after {self._backoff.tries} attempts; {fate}",
            table=self._name,
            batches=str(batches),
            sink_id=self._sink_id,
            hint="raise commit.retry.num-retries or reduce the number of concurrent writers",
        )

    def _log_conflict(self, batches: BatchRange, attempt_no: int, error: Exception) -> None:
        logger.warning(
            "commit of batches %s (sink %s, table %s) conflicted (attempt %s of %s): %s",
            batches,
            self._sink_id,
            self._name,
            attempt_no,
            self._backoff.tries,
            error,
        )

    def _settle_committed(self, committed: Sequence[StagedBatch]) -> tuple[str, ...]:
        """Delete the files of batches the ledger says are committed, where proven unreferenced.

        A batch committed by another attempt: every file of ours is unreferenced. Committed
        by this very attempt (a commit whose outcome was unknown had landed): the files are
        the table's; only leftovers of failed tasks go. Unknown attempt: keep everything.
        """
        deleted: list[str] = []
        for batch in committed:
            by = ledger.attempt_of_batch(self.table, self._sink_id, batch.batch_id)
            if by == batch.attempt:
                deleted.extend(self._delete_leftovers([batch]))
            elif by:
                self.delete_files(batch.files)
                deleted.extend(f.path for f in batch.files)
                deleted.extend(self._delete_leftovers([replace(batch, files=())]))
                logger.info(
                    "batch %s of sink %s was committed to %s by attempt %s: deleted %s files of attempt %s",
                    batch.batch_id,
                    self._sink_id,
                    self._name,
                    by,
                    len(batch.files),
                    batch.attempt,
                )
            else:
                logger.warning(
                    "batch %s of sink %s is committed to %s by an attempt the ledger no longer names: "
                    "kept the %s files of attempt %s (remove_orphan_files() decides)",
                    batch.batch_id,
                    self._sink_id,
                    self._name,
                    len(batch.files),
                    batch.attempt,
                )
        return tuple(deleted)

    def _delete_leftovers(self, batches: Sequence[StagedBatch]) -> tuple[str, ...]:
        """Delete the files in each batch attempt's folder that are not among its committed files."""
        deleted: list[str] = []
        for batch in batches:
            if not batch.location:
                continue  # staged by an earlier version: its files share the data folder
            prefix = batch.location.rstrip("/").rsplit("/", 1)[-1]
            try:
                gone = delete_leftovers(self.table.io, batch.location, prefix, {f.path for f in batch.files})
            except (OSError, TypeError) as e:  # never fail a committed batch for its cleanup
                logger.warning(
                    "leftover files of attempt %s of batch %s (sink %s, table %s) not cleaned up: %s",
                    batch.attempt,
                    batch.batch_id,
                    self._sink_id,
                    self._name,
                    e,
                )
                continue
            if gone:
                logger.info(
                    "deleted %s files of failed tasks of attempt %s of batch %s (sink %s, table %s)",
                    len(gone),
                    batch.attempt,
                    batch.batch_id,
                    self._sink_id,
                    self._name,
                )
            deleted.extend(gone)
        return tuple(deleted)

    def _commit_once(self, staged: Sequence[StagedBatch], batches: BatchRange) -> int | None:
        """One attempt on the refreshed table: the snapshot and the ledger's marker in one catalog call.

        The snapshot is built once from the table's metadata (:mod:`icesink.commit.snapshot`),
        not through a pyiceberg transaction, which would deep-copy the whole metadata at
        each step and retry conflicts without the ledger check this loop makes.

        Raises:
            CommitFailedException: A concurrent commit moved the table (the manifests this
                attempt wrote are deleted: no snapshot references them).
        """
        files = [f for b in staged for f in b.files]
        attempts = {b.batch_id: b.attempt for b in staged}
        marker = ledger.marker_properties(self._sink_id, batches, attempts.get(batches.last, ""))
        if not files:
            failpoints.hit("commit.before")
            self._commit_marker(marker)
            failpoints.hit("commit.lost")
            return None
        producer = SnapshotProducer(
            self.table,
            Operation.APPEND,
            snapshot_properties=ledger.summary_properties(self._sink_id, batches, attempts),
            table_properties=marker,
        )
        with paused_gc():
            for message in files:
                producer.add_file(self._data_file(message), encoded_entry(message))
            pending = producer.build(self.table.metadata)
        failpoints.hit("commit.before")
        try:
            metadata_cache.commit(self.table, pending.updates, pending.requirements)
        except CommitFailedException:
            producer.clean_up()
            raise
        producer.clean_up(keep=pending.files)  # manifests merged into others
        failpoints.hit("commit.lost")  # landed, but the caller never hears of it
        return producer.snapshot_id

    def _commit_marker(self, marker: Mapping[str, str]) -> None:
        """Commit the ledger's marker alone (batches without files), as a property update."""
        metadata_cache.commit(
            self.table,
            (SetPropertiesUpdate(updates=dict(marker)),),
            (AssertTableUUID(uuid=self.table.metadata.table_uuid),),
        )

    def _data_file(self, message: DataFileMessage) -> DataFile:
        return data_file_from_message(message)

    def delete_files(self, files: Sequence[DataFileMessage]) -> None:
        """Delete data files that no commit references."""
        for message in files:
            with contextlib.suppress(FileNotFoundError):
                self._delete_file(message.path)

    @property
    def _name(self) -> str:
        return ".".join(self.table.name())
