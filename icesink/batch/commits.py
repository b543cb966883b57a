"""After the write: each table batch's files committed by one of the commit kinds, recorded once.

A kind commits each table of a micro-batch on its own, with its own exactly-once ledger
(:mod:`icesink.commit.ledger`), on the catalog pool: :class:`AppendCommits` at once,
:class:`StagedCommits` by the commit cadence (:mod:`icesink.commit.policy`), and for upserts
:mod:`icesink.batch.row_deltas` and :mod:`icesink.batch.staged_row_deltas`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame

from icesink import failpoints
from icesink.commit.committer import CommitOutcome, Committer
from icesink.commit.ledger import BatchRange
from icesink.commit.policy import CommitPolicy
from icesink.commit.staging import StagedBatch
from icesink.config import CommitConfig, SinkConfig
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.parallel import run_parallel
from icesink.write.messages import DataFileMessage, RowCounts

if TYPE_CHECKING:
    from icesink.batch.states import TableState
    from icesink.batch.table_batch import TableBatch

__all__ = [
    "AppendCommits",
    "StagedCommits",
    "Written",
    "WrittenBatch",
    "commits_for",
    "record_committed",
]

logger = batch_logger(__name__)


@dataclass
class Written:
    """A table batch after the write: its data files, not yet committed, and in upsert mode
    every key the batch changes on the table (of the table's types)."""

    batch: TableBatch
    files: list[DataFileMessage]
    keys: pa.Table | None = None


@dataclass(frozen=True)
class WrittenBatch:
    """What a plan's write leaves for the batch's commits: the rows the write received and the bad
    ones among them, and what builds the bad rows' dead letters (called only when there are some)
    and the keys of the upserted table batches of ``written`` (in order)."""

    written: list[Written]
    counts: RowCounts
    bad_rows: Callable[[], DataFrame]
    changed_keys: Callable[[], Sequence[pa.Table]]


def record_committed(
    metrics: SinkMetrics,
    name: str,
    sink_id: str,
    batches: BatchRange,
    files: Sequence[DataFileMessage],
    commit: tuple[int | None, int, int],
    count: int = 1,
    detail: str = "",
) -> None:
    """The one place a commit of ``count`` batches to table ``name`` is counted and logged: ``commit`` is
    its snapshot id, tries and conflicts; ``detail`` what the log line says besides rows and files."""
    snapshot_id, tries, conflicts = commit
    metrics.record_commit(name, sink_id, batches.last, list(files), tries, conflicts)
    metrics.batches.labels(name, sink_id, "committed").inc(count)
    logger.info(
        "batches %s of sink %s: %s rows in %s files%s committed to %s as snapshot %s",
        batches,
        sink_id,
        sum(f.record_count for f in files),
        len(files),
        detail,
        name,
        snapshot_id,
    )


def record_row_delta(
    metrics: SinkMetrics,
    name: str,
    sink_id: str,
    batches: BatchRange,
    files: Sequence[DataFileMessage],
    commit: tuple[int | None, int, int],
    deletes: tuple[int, int],
    count: int = 1,
) -> None:
    """:func:`record_committed` of a row delta, its keys and delete files counted too: ``deletes`` is
    the keys it deleted and the delete files it added; every row it added upserted a key."""
    (deleted, delete_files), upserted = deletes, sum(f.record_count for f in files)
    metrics.upserted_keys.labels(name, sink_id).inc(upserted)
    metrics.deleted_keys.labels(name, sink_id).inc(deleted)
    metrics.delete_files.labels(name, sink_id).inc(delete_files)
    detail = f" ({upserted} keys upserted, {deleted} deleted, {delete_files} delete files)"
    record_committed(metrics, name, sink_id, batches, files, commit, count=count, detail=detail)


def _record_outcome(
    metrics: SinkMetrics,
    name: str,
    sink_id: str,
    batches: BatchRange,
    files: Sequence[DataFileMessage],
    outcome: CommitOutcome,
    count: int = 1,
) -> None:
    if outcome.skipped_replay:
        metrics.record_replay(name, sink_id)
    else:
        commit = (outcome.snapshot_id, outcome.attempts, outcome.conflicts)
        record_committed(metrics, name, sink_id, batches, files, commit, count)


def _record_empty(metrics: SinkMetrics, batch: TableBatch) -> None:
    """A batch without rows for the table: the source has caught up, nothing to commit."""
    key = batch.key
    logger.info("batch %s of sink %s is empty: nothing to write to %s", key.batch_id, key.sink_id, batch.name)
    metrics.batches.labels(batch.name, key.sink_id, "empty").inc()


class AppendCommits:
    """Every table batch in a snapshot of its own, now."""

    def __init__(self, metrics: SinkMetrics) -> None:
        self._metrics = metrics

    def commit(self, written: Sequence[Written]) -> None:
        run_parallel([functools.partial(self._commit, w) for w in written])

    def _commit(self, written: Written) -> None:
        failpoints.hit("stage")  # the files written, their commit not begun
        self.commit_one(written)

    def commit_one(self, written: Written, *, record: bool = True) -> CommitOutcome | None:
        """Commit one table batch's files, then end its attempt; ``None`` when it has none.
        ``record=False``: the caller counts and logs the commit (the dead letters' own way)."""
        batch, files, metrics = written.batch, written.files, self._metrics
        key = batch.key
        if not files:
            batch.end()
            _record_empty(metrics, batch)
            return None
        committer = Committer(batch.table, key.sink_id, batch.config.commit)
        batches = BatchRange(key.batch_id, key.batch_id)
        # With its folder, the commit deletes what failed task attempts left there.
        staged = StagedBatch(key.batch_id, key.attempt, tuple(files), location=batch.location)
        with metrics.time_commit(batch.name, key.sink_id):
            outcome = committer.commit_batches([staged], batches, durable=False)
        batch.end()
        if record or outcome.skipped_replay:
            _record_outcome(metrics, batch.name, key.sink_id, batches, files, outcome)
        return outcome


class Cadence:
    """What the two staged commit kinds share: the policy, each written table batch staged under
    its state's lock on the pool, and the commit of what is due or asked for; each kind says
    only what it stages and how it commits the staged batches."""

    def __init__(self, config: CommitConfig, metrics: SinkMetrics) -> None:
        self._metrics = metrics
        self.policy = CommitPolicy(
            target_bytes=config.target_bytes, interval_s=config.interval_s, max_batches=config.max_batches
        )

    def commit(self, written: Sequence[Written]) -> None:
        run_parallel([functools.partial(self._stage_and_commit, w) for w in written])

    def _stage_and_commit(self, written: Written) -> None:
        """Stage one table batch under its state's lock, end its attempt, and commit what is due
        (an empty batch is a boundary: what is staged before it is committed with it)."""
        batch, files = written.batch, written.files
        state, key = batch.state, batch.key
        failpoints.hit("stage")  # the files written, their staging and commit not begun
        with state.lock:
            staged = self.stage(written)
            if staged is not None:
                state.staging.stage(staged)  # durable before foreachBatch returns
                self._metrics.record_staged(batch.name, key.sink_id, state.staging.files)
            batch.end()  # the staged record now accounts for the files
            if staged is None:
                _record_empty(self._metrics, batch)
            if self.policy.due(state.staging) or (staged is None and state.staging.batches):
                self.commit_staged(batch.table, batch.config, state, last_batch_id=key.batch_id)
            elif staged is not None:
                logger.info(
                    "batch %s of sink %s staged (%s files, %s bytes staged in all) for %s",
                    key.batch_id,
                    key.sink_id,
                    len(files),
                    state.staging.size_bytes,
                    batch.name,
                )

    def stage(self, written: Written) -> StagedBatch | None:
        """What one table batch stages, made under its state's lock; ``None``: nothing (an empty batch)."""
        raise NotImplementedError

    def commit_due(
        self, states: Sequence[TableState], table_of: Callable[[TableState], tuple[Table, SinkConfig]]
    ) -> None:
        """Commit the staged batches of ``states`` the policy says are due (tables a batch did not write)."""
        due = [s for s in states if self.policy.due(s.staging)]
        run_parallel([functools.partial(self.flush, s, table_of) for s in due])

    def flush(
        self,
        state: TableState,
        table_of: Callable[[TableState], tuple[Table, SinkConfig]],
        last_batch_id: int | None = None,
    ) -> None:
        """Commit whatever ``state`` has staged (``table_of`` loads its table, with its configuration;
        ``last_batch_id``: an empty batch after them, committed with them)."""
        with state.lock:
            if state.staging.batches:
                table, config = table_of(state)
                self.commit_staged(table, config, state, last_batch_id)

    def commit_staged(
        self, table: Table, config: SinkConfig, state: TableState, last_batch_id: int | None = None
    ) -> None:
        """Commit every batch ``state`` has staged (``last_batch_id``: an empty batch after them)."""
        raise NotImplementedError


class StagedCommits(Cadence):
    """The commit cadence of appended tables: the staged batches' data files in one snapshot."""

    def stage(self, written: Written) -> StagedBatch | None:
        batch, files = written.batch, written.files
        if not files:
            return None
        return StagedBatch(batch.key.batch_id, batch.key.attempt, tuple(files), location=batch.location)

    def commit_staged(
        self, table: Table, config: SinkConfig, state: TableState, last_batch_id: int | None = None
    ) -> None:
        name, sink_id, staged = state.name, state.sink_id, list(state.staging.batches)
        files = state.staging.files
        batches = BatchRange(staged[0].batch_id, max(staged[-1].batch_id, last_batch_id or -1))
        committer = Committer(table, sink_id, config.commit)
        with self._metrics.time_commit(name, sink_id):
            outcome = committer.commit_batches(staged, batches, durable=True)
        _record_outcome(self._metrics, name, sink_id, batches, files, outcome, count=len(staged))
        state.staging.remove(staged)
        self._metrics.record_staged(name, sink_id, state.staging.files)


def commits_for(config: SinkConfig, metrics: SinkMetrics) -> AppendCommits | StagedCommits:
    staged = StagedCommits(config.commit, metrics)
    return staged if staged.policy.stages else AppendCommits(metrics)
