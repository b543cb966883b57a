"""Driver-side commit: one atomic snapshot per commit, retried on conflicts."""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from sink.commit import ledger
from sink.commit.ledger import BatchRange
from sink.config import CommitConfig
from sink.errors import CommitConflictError, CommitError
from sink.write.messages import DataFileMessage

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommitOutcome:
    """What a commit did.

    Attributes:
        snapshot_id: The new snapshot, or ``None`` when nothing was committed.
        attempts: Commit attempts made (1 when there was no conflict).
        conflicts: Attempts that lost a race with a concurrent writer.
        skipped_replay: The batches were found already committed.
    """

    snapshot_id: int | None
    attempts: int
    conflicts: int
    skipped_replay: bool = False


class Committer:
    """Commits data files of a sink's batches to one table, exactly once.

    The snapshot and the replay marker (see :mod:`sink.commit.ledger`) are one atomic
    commit. On a conflict the table is refreshed, the replay check is made again and
    the commit retried with exponential backoff; a commit that finally fails deletes
    the data files it would have added (they are proven unreferenced).

    Args:
        table: The table (refreshed as needed).
        sink_id: The sink's identity in the ledger.
        config: Retry settings.
        delete_file: Deletes a data file by path (the table's FileIO by default).
    """

    def __init__(
        self,
        table: Table,
        sink_id: str,
        config: CommitConfig,
        delete_file: Callable[[str], None] | None = None,
    ) -> None:
        self.table = table
        self._sink_id = sink_id
        self._config = config
        self._delete_file = delete_file or table.io.delete

    def commit(
        self, files: Sequence[DataFileMessage], batches: BatchRange, attempts: Mapping[int, str]
    ) -> CommitOutcome:
        """Commit ``files`` as the data of ``batches`` (``attempts``: each batch's write attempt).

        Raises:
            CommitConflictError: Still conflicting after every retry (files deleted).
            CommitError: The commit failed for another reason; its outcome may be unknown,
                so the files are kept for the replay to decide.
        """
        conflicts = 0
        for attempt_no in range(1, self._config.retries + 2):
            self.table.refresh()
            if ledger.is_committed(self.table, self._sink_id, batches.last):
                logger.info(
                    "batches %s of sink %s already committed to %s; not committing again",
                    batches,
                    self._sink_id,
                    self._name,
                )
                return CommitOutcome(None, attempt_no, conflicts, skipped_replay=True)
            try:
                snapshot_id = self._commit_once(files, batches, attempts)
            except CommitFailedException as e:
                conflicts += 1
                wait_ms = min(self._config.min_wait_ms * 2 ** (attempt_no - 1), self._config.max_wait_ms)
                wait_ms += random.uniform(0, 0.1 * wait_ms)
                logger.warning(
                    "commit of batches %s (sink %s, table %s) conflicted (attempt %s): %s; "
                    "retrying in %.0f ms",
                    batches,
                    self._sink_id,
                    self._name,
                    attempt_no,
                    e,
                    wait_ms,
                )
                time.sleep(wait_ms / 1000)
                continue
            except Exception as e:
                raise CommitError(
                    f"commit failed with an unknown outcome: {type(e).__name__}: {e}",
                    table=self._name,
                    batches=str(batches),
                    sink_id=self._sink_id,
                    hint="the batch will be checked against the table when Spark replays it",
                ) from e
            logger.info(
                "committed %s files of batches %s (sink %s) to %s as snapshot %s",
                len(files),
                batches,
                self._sink_id,
                self._name,
                snapshot_id,
            )
            return CommitOutcome(snapshot_id, attempt_no, conflicts)
        self.delete_files(files)
        raise CommitConflictError(
            f"commit still conflicting after {self._config.retries + 1} attempts; "
            f"its {len(files)} data files were deleted",
            table=self._name,
            batches=str(batches),
            sink_id=self._sink_id,
            hint="raise commit.retry.num-retries or reduce the number of concurrent writers",
        )

    def _commit_once(
        self, files: Sequence[DataFileMessage], batches: BatchRange, attempts: Mapping[int, str]
    ) -> int | None:
        table = self.table
        summary = ledger.summary_properties(self._sink_id, batches, attempts)
        merge = table.metadata.properties.get("commit.manifest-merge.enabled", "false").lower() == "true"
        with table.transaction() as tx:
            if files:
                update = tx.update_snapshot(snapshot_properties=summary)
                with update.merge_append() if merge else update.fast_append() as append:
                    for message in files:
                        append.append_data_file(self._data_file(message))
            marker = ledger.marker_properties(self._sink_id, batches, attempts.get(batches.last, ""))
            tx.set_properties(marker)
        snapshot = table.current_snapshot()
        return snapshot.snapshot_id if files and snapshot is not None else None

    def _data_file(self, message: DataFileMessage) -> DataFile:
        return DataFile.from_args(
            _table_format_version=self.table.format_version,
            content=DataFileContent.DATA,
            file_path=message.path,
            file_format=FileFormat.PARQUET,
            partition=Record(*message.partition),
            record_count=message.record_count,
            file_size_in_bytes=message.file_size_bytes,
            column_sizes=message.column_sizes,
            value_counts=message.value_counts,
            null_value_counts=message.null_value_counts,
            nan_value_counts=message.nan_value_counts,
            lower_bounds=message.lower_bounds,
            upper_bounds=message.upper_bounds,
            split_offsets=list(message.split_offsets) or None,
            sort_order_id=None,
            spec_id=message.spec_id,
            equality_ids=None,
            key_metadata=None,
        )

    def delete_files(self, files: Sequence[DataFileMessage]) -> None:
        """Delete data files that no commit references."""
        for message in files:
            with contextlib.suppress(FileNotFoundError):
                self._delete_file(message.path)

    @property
    def _name(self) -> str:
        return ".".join(self.table.name())
