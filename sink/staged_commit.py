"""Steps 5 and 6 on the driver: stage a batch's files, commit the staged batches, recover.

A written batch is staged (durably when the commit policy may hold it for later,
:mod:`sink.commit.staging`) and committed with the batches staged before it once the
policy says so (:mod:`sink.commit.policy`): one snapshot through the
:class:`~sink.commit.committer.Committer`, exactly once by its ledger. On the first
batch of a sink id in a process, what a crashed run left behind is settled first.
"""

from __future__ import annotations

from pyiceberg.table import Table

from sink import failpoints
from sink.commit import ledger
from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.commit.policy import CommitPolicy
from sink.commit.recovery import AttemptLog
from sink.commit.staging import StagedBatch
from sink.config import SinkConfig
from sink.log_context import batch_logger
from sink.metrics import SinkMetrics
from sink.sink_state import SinkState
from sink.write_step import WrittenBatch

logger = batch_logger(__name__)


class StagedCommits:
    """Stages written batches and commits them, for one sink configuration.

    Args:
        config: The sink's configuration (its commit cadence and retries).
        metrics: Where commits, replays, staged files and orphans are recorded.
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self.config = config
        self.metrics = metrics
        self._policy = CommitPolicy(
            target_bytes=config.commit.target_bytes,
            interval_s=config.commit.interval_s,
            max_batches=config.commit.max_batches,
        )

    @property
    def stages(self) -> bool:
        """Whether batches may be held for a later commit (then staged durably)."""
        return self._policy.stages

    def stage(self, state: SinkState, written: WrittenBatch) -> bool:
        """Stage ``written``'s files; whether it is a chunk boundary (an empty batch)."""
        name, sink_id, files = self.config.table, state.sink_id, written.files
        failpoints.hit("stage")
        if files:
            batch = StagedBatch(written.batch_id, written.attempt, tuple(files), location=written.location)
            if self._policy.stages:
                state.staging.stage(batch)  # durable before foreachBatch returns
                self.metrics.record_staged(name, sink_id, state.staging.files)
            else:
                state.staging.batches.append(batch)
        if self._policy.stages or not files:
            written.end_attempt()  # the staged record now accounts for the files
        if not files:  # an empty batch: the source has caught up
            logger.info(
                "batch %s of sink %s is empty: nothing to write to %s", written.batch_id, sink_id, name
            )
            self.metrics.batches.labels(name, sink_id, "empty").inc()
        return not files

    def commit_if_due(self, table: Table, state: SinkState, written: WrittenBatch, boundary: bool) -> None:
        """Commit the staged batches when the policy says so or at a chunk boundary."""
        name, sink_id, files = self.config.table, state.sink_id, written.files
        if self._policy.due(state.staging) or (boundary and state.staging.batches):
            self.commit_staged(table, state, last_batch_id=written.batch_id)
            # Unstaged files stay under their attempt record until committed: if the
            # commit's outcome is unknown, the restarted sink settles them.
            written.end_attempt()
        elif files:
            logger.info(
                "batch %s of sink %s staged (%s files, %s bytes staged in all) for %s",
                written.batch_id,
                sink_id,
                len(files),
                state.staging.size_bytes,
                name,
            )

    def commit_staged(self, table: Table, state: SinkState, last_batch_id: int | None = None) -> None:
        """Commit every staged batch of ``state`` in one snapshot."""
        name, sink_id, staged = self.config.table, state.sink_id, list(state.staging.batches)
        files = state.staging.files
        batches = BatchRange(staged[0].batch_id, max(staged[-1].batch_id, last_batch_id or -1))
        committer = Committer(table, sink_id, self.config.commit)
        with self.metrics.time_commit(name, sink_id):
            try:
                outcome = committer.commit_batches(staged, batches, durable=self._policy.stages)
            except Exception:
                if not self._policy.stages:
                    state.staging.batches.clear()  # Spark replays the batch; nothing is staged durably
                raise
        if outcome.skipped_replay:
            self.metrics.record_replay(name, sink_id)
        else:
            # 7. metrics
            self.metrics.record_commit(
                name, sink_id, batches.last, files, outcome.attempts, outcome.conflicts
            )
            self.metrics.batches.labels(name, sink_id, "committed").inc(len(staged))
            logger.info(
                "batches %s of sink %s: %s rows in %s files committed to %s as snapshot %s",
                batches,
                sink_id,
                sum(f.record_count for f in files),
                len(files),
                name,
                outcome.snapshot_id,
            )
        state.staging.remove(staged)
        self.metrics.record_staged(name, sink_id, state.staging.files)

    def recover(self, table: Table, state: SinkState) -> None:
        """Settle crashed attempts and reload staged batches (first use of a sink id in this process)."""
        name = self.config.table
        staged = state.staging.load()
        committed = [b for b in staged if ledger.is_committed(table, state.sink_id, b.batch_id)]
        state.staging.remove(committed)  # the crash came between commit and cleanup
        if state.staging.batches:
            logger.info(
                "sink %s resumes %s staged batches (%s..%s) for %s",
                state.sink_id,
                len(state.staging.batches),
                state.staging.batches[0].batch_id,
                state.staging.batches[-1].batch_id,
                name,
            )
        staged_attempts = frozenset(b.attempt for b in state.staging.batches)
        report = AttemptLog.for_sink(self.config, table, state.sink_id).recover(table, staged_attempts)
        if report.deleted_files:
            self.metrics.orphan_files.labels(name, "deleted").inc(len(report.deleted_files))
        if report.kept_files:
            self.metrics.orphan_files.labels(name, "kept").inc(len(report.kept_files))
