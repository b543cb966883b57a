"""Step 6 of a routed batch: each table's files committed on its own, exactly once by its ledger."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from sink.commit.committer import Committer
from sink.commit.ledger import BatchRange
from sink.log_context import batch_logger
from sink.metrics import SinkMetrics
from sink.parallel import run_parallel
from sink.routed_write import RoutedTarget
from sink.write.messages import DataFileMessage

logger = batch_logger(__name__)


def commit_tables(
    targets: Sequence[RoutedTarget],
    files: Sequence[DataFileMessage],
    metrics: SinkMetrics,
    sink_id: str,
    batch_id: int,
    attempt: str,
) -> None:
    """Commit each target's ``files`` (each names its table), on the sink's catalog thread pool."""
    batch = _BatchCommit(files, metrics, sink_id, batch_id, attempt)
    run_parallel([functools.partial(batch.commit, t) for t in targets])


@dataclass(frozen=True)
class _BatchCommit:
    files: Sequence[DataFileMessage]
    metrics: SinkMetrics
    sink_id: str
    batch_id: int
    attempt: str

    def commit(self, target: RoutedTarget) -> None:
        """Commit ``target``'s files of the batch, then end its attempt."""
        name, metrics, sink_id, batch_id = target.name, self.metrics, self.sink_id, self.batch_id
        mine = [f for f in self.files if f.table == name]
        committer = Committer(target.table, sink_id, target.config.commit)
        with metrics.time_commit(name, sink_id):
            outcome = committer.commit(mine, BatchRange(batch_id, batch_id), {batch_id: self.attempt})
        assert target.attempts is not None
        target.attempts.end(batch_id, self.attempt)
        if outcome.skipped_replay:
            metrics.record_replay(name, sink_id)
            return
        metrics.record_commit(name, sink_id, batch_id, mine, outcome.attempts, outcome.conflicts)
        metrics.batches.labels(name, sink_id, "committed").inc()
        logger.info(
            "batch %s of sink %s: %s rows in %s files committed to %s as snapshot %s",
            batch_id,
            sink_id,
            sum(f.record_count for f in mine),
            len(mine),
            name,
            outcome.snapshot_id,
        )
