"""After the write, for one table or many: steps 8 to 10 of :mod:`icesink.sink`, and the flushes.

The one ``commitToTable`` of every plan: the dead letters first (:mod:`icesink.batch.dead_letters`
says why), each table batch by its commit kind, what is due on the sink id's other tables, the
committed tables' maintenance in one time budget. Staged batches are also committed at a chunk
boundary: an empty batch, ``close()``, a query gone idle or stopped (:class:`IdleListeners`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession

from icesink import failpoints
from icesink.batch.changes import ChangeSplit
from icesink.batch.commits import StagedCommits, WrittenBatch, commits_for
from icesink.batch.dead_letters import DeadLetterQueue
from icesink.batch.row_deltas import RowDeltaCommits
from icesink.batch.staged_row_deltas import StagedRowDeltaCommits
from icesink.bounded_waits import server_errors
from icesink.config import SinkConfig
from icesink.destinations.table_options import TableOptions
from icesink.errors import SinkClosedError
from icesink.maintenance.after_commit import BatchMaintenance
from icesink.parallel import run_parallel
from icesink.query_events import subscribe, unsubscribe
from icesink.spark_session import query_session, session_key

if TYPE_CHECKING:
    from icesink.batch.changes import ChangeBatch
    from icesink.batch.key import BatchKey
    from icesink.batch.states import SinkParts, TableState

logger = logging.getLogger(__name__)


class Finish:
    """The commits of a sink's batches, whatever their number of tables."""

    def __init__(self, parts: SinkParts) -> None:
        self.parts = parts
        self._config = config = parts.config
        self._catalog = catalog = parts.catalog
        metrics = parts.metrics
        self.states = states = parts.states
        self.dead_letters = DeadLetterQueue(config, catalog, metrics, states)
        self.changes = ChangeSplit(config, metrics)
        self.options = TableOptions(config)
        self.maintenance = BatchMaintenance(config, metrics)
        self._commits = commits_for(config, metrics)
        self._staged = self._commits if isinstance(self._commits, StagedCommits) else None
        self.stages = self._staged is not None
        self._staged_upserts = StagedRowDeltaCommits(config.commit, metrics)
        self._upserts = RowDeltaCommits(metrics)  # its key index stores kept from batch to batch

    def config_for(self, name: str) -> SinkConfig:
        return self.options.config_for(name) if self._config.route.enabled else self._config

    def finish(self, key: BatchKey, done: WrittenBatch, changes: ChangeBatch, spark: SparkSession) -> None:
        """Commit what the write of batch ``key`` left (``done``).

        ``changes``: the batch's changes (upsert mode), or the batch as it is; ``spark``: the
        batch's session (the upserts' lookup job runs on it).
        """
        written = done.written
        rows = sum(f.record_count for w in written for f in w.files)
        dead_letters, counts = self.changes.dead_letters(changes, done.bad_rows, done.counts)
        if not self.dead_letters.deliver(dead_letters, key, rows, counts).skipped_replay:
            self.changes.count_rejected(changes)
        upserted = [w for w in written if w.batch.config.upsert.enabled]
        if upserted:
            with self.changes.timed((w.batch.name for w in upserted), "keys"):
                keys = done.changed_keys()
            for w, table_keys in zip(upserted, keys, strict=True):
                w.keys = table_keys
            if self.stages:
                self._staged_upserts.spark = spark
                self._staged_upserts.commit(upserted)
            else:
                self._upserts.commit(upserted, spark)
        self._commits.commit([w for w in written if not w.batch.config.upsert.enabled])
        failpoints.hit("commit.after")
        now = {w.batch.name for w in written}
        self.flush(lambda s: s.sink_id == key.sink_id and s.name not in now, due_only=True)
        self.maintenance.after_commit([w.batch.committed() for w in written])

    def flush(
        self,
        which: Callable[[TableState], bool] = lambda state: True,
        *,
        due_only: bool = False,
        last_batch_id: int | None = None,
    ) -> None:
        """Commit what the states ``which`` picks have staged (``due_only``: what the cadence says is
        due; ``last_batch_id``: an empty batch, committed with them)."""
        if self._staged is None:
            return
        states = [s for s in self.states.states() if which(s) and s.name != self.dead_letters.table_name]
        if due_only:
            for kind in (self._staged, self._staged_upserts):
                kind.commit_due([s for s in states if self._kind(s) is kind], self._table_of)
        else:
            run_parallel([functools.partial(self._flush, self._kind(s), s, last_batch_id) for s in states])

    def _kind(self, state: TableState) -> StagedCommits | StagedRowDeltaCommits:
        assert self._staged is not None
        return self._staged_upserts if self.config_for(state.name).upsert.enabled else self._staged

    def _flush(
        self, staged: StagedCommits | StagedRowDeltaCommits, state: TableState, last_batch_id: int | None
    ) -> None:
        with server_errors(self._config, table=state.name):
            staged.flush(state, self._table_of, last_batch_id)

    def _table_of(self, state: TableState) -> tuple[Table, SinkConfig]:
        return self._catalog.load_table(state.name), self.config_for(state.name)


class Flushable(Protocol):
    """What :class:`IdleListeners` flushes: the sink itself, so that a closed sink refuses."""

    def flush(self, query_id: str | None = None) -> None: ...


class IdleListeners:
    """Flushes one sink's staged batches when its queries go idle or stop (a session's listener holds
    it weakly; the sink keeps it alive)."""

    def __init__(self, sink: Flushable) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._sessions: dict[str, SparkSession] = {}  # the sessions listened on, by JVM identity

    def on_progress(self, event: Any) -> None:
        pass

    def on_idle(self, query_id: str) -> None:
        self._flush(query_id)

    def on_terminated(self, query_id: str) -> None:
        self._flush(query_id)

    def _flush(self, query_id: str) -> None:
        try:
            self._sink.flush(query_id)
        except SinkClosedError:  # an event queued before close() unsubscribed
            return
        except Exception:  # a listener must not kill the listener bus; the next batch retries
            logger.exception("flushing staged batches of query %s failed", query_id)

    def listen(self, batch_df: DataFrame) -> None:
        """Flush the sink when ``batch_df``'s query goes idle or stops: registered once on the session
        that started the query, as the one handed to ``foreachBatch`` is a clone whose listeners never
        hear of a query; never under Spark Connect, where a listener would run a copy of the sink."""
        spark = query_session(batch_df)
        if spark is None:
            return
        key = session_key(spark)
        with self._lock:
            if key in self._sessions:
                return
            self._sessions[key] = spark
        subscribe(spark, self)

    def stop(self) -> None:
        with self._lock:
            added = list(self._sessions.values())
        for spark in added:
            with contextlib.suppress(Exception):  # a stopped session has no listener bus left
                unsubscribe(spark, self)
