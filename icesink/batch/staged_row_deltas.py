"""The staged row delta commit kind: upserts with the commit cadence, exactly once.

Under its table state's lock, a table batch's keys are looked up in the table's current snapshot
AND in the data files of the batches staged before it, skipping the rows their staged delete files
removed already (:meth:`~icesink.upsert.plan.LookupPlanner.plan`); the batch is staged with its
delete files, keys and lookup snapshot (:class:`~icesink.commit.staging.StagedBatch`) before
``foreachBatch`` returns. Once the cadence is due, or at a chunk boundary, every staged batch is
committed in ONE row delta from the first one's snapshot, the whole range of batches in the
ledger and the union of their keys checked against concurrent commits.

One snapshot is valid for all of them: its files share one data sequence number, and a
position delete applies to the data files of its partition whose data sequence number is
at most its own, so a batch's deletes of rows an earlier staged batch wrote take effect.
A conflict (a concurrent commit removed a file the deletes point at, or added rows of one
of the keys) redoes the staged batches' lookups in order on the refreshed table, stages
them again durably, removes the old delete files, and commits again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink.batch.commits import Cadence, Written, record_row_delta
from icesink.batch.key import BatchKey, new_attempt_id
from icesink.catalog import executor_io_properties
from icesink.commit import metadata_cache
from icesink.commit.ledger import BatchRange
from icesink.commit.recovery import delete_leftovers
from icesink.commit.staging import StagedBatch
from icesink.config import CommitConfig, SinkConfig
from icesink.errors import RowDeltaConflictError, UpsertError
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.upsert.batch import DEFAULT_LOOKUP_REDOS
from icesink.upsert.key_index import IndexFormatError
from icesink.upsert.key_index_lookup import IndexCommit, look_up
from icesink.upsert.key_index_update import KeyIndexStore, key_index_store
from icesink.upsert.lookup import LookupResult, LookupSpec, run_lookup_locally
from icesink.upsert.lookup_jobs import run_table_lookups
from icesink.upsert.messages import LookupTask
from icesink.upsert.plan import LookupPlanner
from icesink.upsert.row_delta import RowDeltaCommitter, RowDeltaOutcome, delete_uncommitted
from icesink.upsert.validate import ConcurrentKeys
from icesink.write.messages import DataFileMessage, decode_keys, encode_keys

if TYPE_CHECKING:
    from icesink.batch.states import TableState

__all__ = ["StagedRowDeltaCommits"]

logger = batch_logger(__name__)


def _file_prefix(sink_id: str, batch: StagedBatch) -> str:
    """What the names of the staged batch's attempt's files start with."""
    return BatchKey(sink_id, batch.batch_id, batch.attempt).file_prefix


def union_keys(staged: Sequence[StagedBatch]) -> pa.Table:
    """Every key the staged batches change (their key tables one after the other).

    Raises:
        UpsertError: A batch was staged by an appending sink (no keys): its rows were never looked up.
    """
    appended = [b.batch_id for b in staged if not b.keys]
    if appended:
        raise UpsertError(
            f"staged batches {appended} were staged by a sink in write.mode=append and cannot be "
            "committed as upserts: their rows were never looked up",
            hint="run the sink once more with write.mode=append and close() it to commit them, "
            "then switch to write.mode=upsert",
        )
    return pa.concat_tables([decode_keys(b.keys) for b in staged], promote_options="permissive")


class StagedRowDeltaCommits(Cadence):
    """The commit cadence of an upserting sink; ``spark``: the session lookups run on (the last batch's;
    ``None``: in this process)."""

    def __init__(self, config: CommitConfig, metrics: SinkMetrics) -> None:
        super().__init__(config, metrics)
        self.spark: SparkSession | None = None
        self._planners: dict[tuple[str, str], LookupPlanner] = {}
        self._stores: dict[tuple[str, str], KeyIndexStore] = {}
        self._lock = threading.Lock()

    def stage(self, written: Written) -> StagedBatch | None:
        """The table batch's files with the position deletes of its lookup; ``None`` without rows or keys."""
        batch, files, keys = written.batch, written.files, written.keys
        assert keys is not None
        if not files and not keys.num_rows:
            return None
        key = batch.key
        metadata_cache.refresh(batch.table)
        with self._metrics.time_step(batch.name, "lookup"):
            look_up = self._look_up(batch.table, batch.config, batch.state, key.batch_id, key.attempt)
            return look_up(keys, files, batch.location)

    def _look_up(
        self, table: Table, config: SinkConfig, state: TableState, batch_id: int, attempt: str
    ) -> Callable[[pa.Table, Sequence[DataFileMessage], str], StagedBatch]:
        """Looks one batch's keys up in the table and the batches staged before it; its staged record."""
        planner = self._planner(table, config, state)
        earlier = [b for b in state.staging.batches if b.batch_id < batch_id]

        def run(keys: pa.Table, files: Sequence[DataFileMessage], location: str) -> StagedBatch:
            prefix = f"{BatchKey(state.sink_id, batch_id, attempt).file_prefix}-r{new_attempt_id()[:8]}"
            spec = LookupSpec(
                state.name,
                executor_io_properties(config, table),
                prefix,
                config.write.compression_codec,
                location=location or None,
            )
            store = self._store(table, config, state)
            if store is not None:
                snapshot_id, result = self._look_up_in_index(store, table, config, earlier, keys, spec)
            else:
                plan = planner.plan(table.metadata, keys, earlier)
                snapshot_id, result = plan.snapshot_id, self._run(spec, plan.tasks, config)
            return StagedBatch(
                batch_id,
                attempt,
                tuple(files),
                location=location,
                delete_files=tuple(result.delete_files),
                keys=encode_keys(keys),
                snapshot_id=snapshot_id,
            )

        return run

    def _store(self, table: Table, config: SinkConfig, state: TableState) -> KeyIndexStore | None:
        return key_index_store(self._stores, self._lock, state.name, state.sink_id, table, config.upsert)

    @staticmethod
    def _look_up_in_index(
        store: KeyIndexStore,
        table: Table,
        config: SinkConfig,
        earlier: Sequence[StagedBatch],
        keys: pa.Table,
        spec: LookupSpec,
    ) -> tuple[int | None, LookupResult]:
        """The lookup through the key index with the staged batches' files and deletes overlaid."""
        metadata = table.metadata
        for rebuild in (False, True):
            view = store.rebuilt(metadata) if rebuild else store.at(metadata)
            snapshot_id = view.snapshot_id
            try:
                for b in earlier:
                    view = view.apply(store.step_of_files(metadata, b.files, b.delete_files), snapshot_id)
                return snapshot_id, look_up(view, metadata, config.upsert.key_columns, keys, spec, store)[0]
            except IndexFormatError as e:
                if rebuild:
                    raise
                logger.warning("key index of %s unreadable, rebuilding it: %s", spec.table, e)
        raise AssertionError("unreachable")

    def _run(self, spec: LookupSpec, tasks: Sequence[LookupTask], config: SinkConfig) -> LookupResult:
        """A lookup's tasks: as an unstaged batch's (:func:`run_table_lookups`), in this process
        when no batch gave a session yet (staged batches committed by a restarted sink's flush)."""
        if self.spark is None:
            return run_lookup_locally(list(tasks), spec)
        return run_table_lookups(self.spark, [(spec, list(tasks))], config.upsert.lookup_driver_max_files)[0]

    def _planner(self, table: Table, config: SinkConfig, state: TableState) -> LookupPlanner:
        """The table's planner (its manifest cache kept across batches)."""
        with self._lock:
            key = (state.name, state.sink_id)
            planner = self._planners.get(key)
            if planner is None:
                planner = self._planners[key] = LookupPlanner(table.io, config.upsert.key_columns, state.name)
            return planner

    def commit_staged(
        self, table: Table, config: SinkConfig, state: TableState, last_batch_id: int | None = None
    ) -> None:
        """Commit every batch ``state`` has staged in one row delta (their lookups redone on a conflict)."""
        name, sink_id = state.name, state.sink_id
        for redo in range(DEFAULT_LOOKUP_REDOS + 1):
            staged = list(state.staging.batches)
            batches = BatchRange(staged[0].batch_id, max(staged[-1].batch_id, last_batch_id or -1))
            try:
                outcome = self._commit(table, config, state, staged, batches)
            except RowDeltaConflictError as e:
                if redo == DEFAULT_LOOKUP_REDOS:
                    raise
                logger.warning(
                    "staged batches %s of %s: %s; redoing their lookups (%s of %s)",
                    batches,
                    name,
                    e,
                    redo + 1,
                    DEFAULT_LOOKUP_REDOS,
                )
                self._redo(table, config, state)
                continue
            break
        if outcome.skipped_replay:
            self._metrics.record_replay(name, sink_id)
        else:
            for b in staged:
                if b.location:  # what failed tasks and redone lookups left in the attempt's folder
                    taken = {f.path for f in (*b.files, *b.delete_files)}
                    delete_leftovers(table.io, b.location, _file_prefix(sink_id, b), taken)
            self._record(state, staged, batches, outcome)
        store = self._stores.get((name, sink_id))
        if store is not None:
            self._metrics.record_key_index(name, sink_id, store.take_counts())
        state.staging.remove(staged)
        self._metrics.record_staged(name, sink_id, state.staging.files)

    def _commit(
        self,
        table: Table,
        config: SinkConfig,
        state: TableState,
        staged: list[StagedBatch],
        batches: BatchRange,
    ) -> RowDeltaOutcome:
        committer = RowDeltaCommitter(table, state.sink_id, config.commit)
        data = [f for b in staged for f in b.files]
        deletes = [f for b in staged for f in b.delete_files]
        keys = ConcurrentKeys(table.io, config.upsert.key_columns, union_keys(staged))
        attempts = {b.batch_id: b.attempt for b in staged}
        index = None
        store = self._store(table, config, state)
        if store is not None:
            try:
                steps = [store.step_of_files(table.metadata, b.files, b.delete_files) for b in staged]
                index = IndexCommit(table, store, store.at(table.metadata), steps)
            except IndexFormatError as e:  # committed without it: the next batch rebuilds it
                logger.warning("key index of %s not committed: %s", state.name, e)
                store.forget()
        with self._metrics.time_commit(state.name, state.sink_id):
            return committer.commit(data, deletes, staged[0].snapshot_id, batches, attempts, keys, index)

    def _redo(self, table: Table, config: SinkConfig, state: TableState) -> None:
        """The staged batches' lookups again, in order, on the refreshed table; each staged again."""
        metadata_cache.refresh(table)
        for old in list(state.staging.batches):
            look_up = self._look_up(table, config, state, old.batch_id, old.attempt)
            state.staging.restage(look_up(decode_keys(old.keys), old.files, old.location))
            delete_uncommitted(table, old.delete_files)  # the new record no longer names them

    def _record(
        self, state: TableState, staged: list[StagedBatch], batches: BatchRange, outcome: RowDeltaOutcome
    ) -> None:
        """Count and log one committed row delta of staged upsert batches."""
        files = [f for b in staged for f in b.files]
        deleted = sum(
            max(0, decode_keys(b.keys).num_rows - sum(f.record_count for f in b.files)) for b in staged
        )
        deletes = (deleted, sum(len(b.delete_files) for b in staged))
        commit = (outcome.snapshot_id, outcome.attempts, outcome.conflicts)
        metrics = self._metrics
        record_row_delta(metrics, state.name, state.sink_id, batches, files, commit, deletes, len(staged))
