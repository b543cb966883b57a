"""After the write, for one table or many: the dead letters, then every table batch's commit.

The last steps of a micro-batch, told once for the one-table sink (:mod:`icesink.sink`) and the
routed step (:mod:`icesink.batch.routed`), as Iceberg Kafka Connect commits one table or many
through one ``commitToTable``:

1. the dead letters (bad values, rejected changes), committed before the data, so a replay
   cannot repeat them (:mod:`icesink.batch.dead_letters`);
2. the upserted tables: the keys they change (one job; a one-table batch's written keys come
   with its files, only its deletes' are collected), then a row delta each
   (:mod:`icesink.batch.row_deltas`), or, with a commit cadence, staged with their position
   deletes (:mod:`icesink.batch.staged_row_deltas`);
3. the appended tables: appended, or staged for the commit cadence (:mod:`icesink.batch.commits`);
4. the cadence of the sink id's other tables: what is due is committed;
5. the committed tables' maintenance, in one time budget (:mod:`icesink.maintenance.after_commit`).

:meth:`Finish.flush` commits what the table states it is given have staged: a query gone
idle or stopped, an empty batch, ``close()``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink import failpoints
from icesink.batch.changes import ChangeSplit
from icesink.batch.commits import StagedCommits, WrittenBatch, commits_for
from icesink.batch.dead_letters import DeadLetterQueue
from icesink.batch.row_deltas import RowDeltaCommits
from icesink.batch.staged_row_deltas import StagedRowDeltaCommits
from icesink.bounded_waits import server_errors
from icesink.config import SinkConfig
from icesink.destinations.table_options import TableOptions
from icesink.maintenance.after_commit import BatchMaintenance
from icesink.parallel import run_parallel

if TYPE_CHECKING:
    from icesink.batch.changes import ChangeBatch
    from icesink.batch.key import BatchKey
    from icesink.batch.states import SinkParts, TableState


class Finish:
    """The commits of a sink's batches, whatever their number of tables (see the module).

    Args:
        parts: The sink's configuration, catalog, metrics and table states (their staged batches).

    Attributes:
        dead_letters: The sink's dead-letter queue.
        changes: The sink's upsert split (its rejected changes' dead letters and counts).
        options: Each routed table's configuration; :meth:`config_for` any table's.
    """

    def __init__(self, parts: SinkParts) -> None:
        self.parts = parts
        self._config = config = parts.config
        self._catalog = catalog = parts.catalog
        self._metrics = metrics = parts.metrics
        self.states = states = parts.states
        self.dead_letters = DeadLetterQueue(config, catalog, metrics, states)
        self.changes = ChangeSplit(config, metrics)
        self.options = TableOptions(config)
        self.maintenance = BatchMaintenance(config, metrics)
        self._commits = commits_for(config, metrics)
        self._staged = self._commits if isinstance(self._commits, StagedCommits) else None
        self.stages = self._staged is not None  # a commit cadence: flushed when a query idles
        self._staged_upserts = StagedRowDeltaCommits(config.commit, metrics)
        self._upserts = RowDeltaCommits(metrics)  # its key index stores kept from batch to batch

    def config_for(self, name: str) -> SinkConfig:
        """A table's configuration: a routed table's own options applied; the one table's is the sink's."""
        return self.options.config_for(name) if self._config.route.enabled else self._config

    def finish(self, key: BatchKey, done: WrittenBatch, changes: ChangeBatch, spark: SparkSession) -> None:
        """Steps 1 to 5 of the module for what the batch ``key``'s write left (``done``).

        ``changes``: the batch's changes (upsert mode), or the batch as it is; ``spark``: the
        batch's session (the upserts' lookup job runs on it).
        """
        written = done.written
        rows = sum(f.record_count for w in written for f in w.files)
        dead_letters, counts = self.changes.dead_letters(changes, done.bad_rows, done.counts)
        if not self.dead_letters.deliver(dead_letters, key, rows, counts).skipped_replay:  # 1.
            self.changes.count_rejected(changes)
        upserted = [w for w in written if w.batch.config.upsert.enabled]
        if upserted:  # 2.
            with self.changes.timed((w.batch.name for w in upserted), "keys"):
                keys = done.changed_keys()
            for w, table_keys in zip(upserted, keys, strict=True):
                w.keys = table_keys
            if self.stages:
                self._staged_upserts.spark = spark
                self._staged_upserts.commit(upserted)
            else:
                self._upserts.commit(upserted, spark)
        self._commits.commit([w for w in written if not w.batch.config.upsert.enabled])  # 3.
        failpoints.hit("commit.after")
        now = {w.batch.name for w in written}  # 4.
        self.flush(lambda s: s.sink_id == key.sink_id and s.name not in now, due_only=True)
        self.maintenance.after_commit([w.batch.committed() for w in written])  # 5.

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
        """The staged commit kind of a table: row deltas for an upserted one."""
        assert self._staged is not None
        return self._staged_upserts if self.config_for(state.name).upsert.enabled else self._staged

    def _flush(
        self, staged: StagedCommits | StagedRowDeltaCommits, state: TableState, last_batch_id: int | None
    ) -> None:
        with server_errors(self._config, table=state.name):
            staged.flush(state, self._table_of, last_batch_id)

    def _table_of(self, state: TableState) -> tuple[Table, SinkConfig]:
        return self._catalog.load_table(state.name), self.config_for(state.name)
