"""One upsert batch on the driver: plan the lookup, run it, commit the row delta, redo on conflict.

The batch's new data files are written by the caller (the sink's usual write step, with
the rows of :class:`~icesink.upsert.changes.ChangeSet`); this module finds and deletes the
rows they replace. A :class:`~icesink.errors.RowDeltaConflictError` (a concurrent commit
removed or changed a data file the deletes point at, or added rows of the batch's keys)
is handled here: the delete files
of the attempt are removed, the lookup is planned again on the refreshed table and the
commit retried; the data files stay as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa
from pyiceberg.table import Table

from icesink.commit import ledger, metadata_cache
from icesink.commit.ledger import BatchRange
from icesink.config import CommitConfig
from icesink.errors import RowDeltaConflictError
from icesink.upsert.key_index import IndexFormatError, Partition
from icesink.upsert.key_index_lookup import IndexCommit, look_up
from icesink.upsert.key_index_update import KeyIndexStore
from icesink.upsert.key_index_view import KeyIndex
from icesink.upsert.lookup import LookupResult, LookupSpec
from icesink.upsert.messages import LookupReport, LookupTask
from icesink.upsert.plan import LookupPlan, LookupPlanner
from icesink.upsert.row_delta import RowDeltaCommitter, RowDeltaOutcome, delete_uncommitted
from icesink.upsert.validate import ConcurrentKeys
from icesink.write.messages import DataFileMessage

logger = logging.getLogger(__name__)

LookupRunner = Callable[[list[LookupTask], LookupSpec], LookupResult]
"""Runs lookup tasks: :func:`~icesink.upsert.lookup.run_lookup` bound to a Spark session, or
:func:`~icesink.upsert.lookup.run_lookup_locally`."""

# Lookups redone after conflicts before the batch fails (retryable).
DEFAULT_LOOKUP_REDOS = 3


@dataclass(frozen=True)
class UpsertOutcome:
    """What an upsert batch did.

    Attributes:
        commit: The row delta commit.
        plan: The last lookup plan (files read against files in the table).
        report: What the last lookup read and found.
        delete_files: Position delete files committed.
        redos: Lookups redone after a conflict.
        delete_paths: The committed delete files' paths.
    """

    commit: RowDeltaOutcome
    plan: LookupPlan
    report: LookupReport
    delete_files: int
    redos: int
    delete_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedLookup:
    """A lookup planned on the table's current snapshot, and the spec its tasks run with.

    Through the key index the lookup is done when planned: ``result`` and the index
    ``view`` it read are given, and the plan has no tasks.
    """

    plan: LookupPlan
    spec: LookupSpec
    result: LookupResult | None = None
    view: KeyIndex | None = None
    found: dict[Partition, pa.Table] | None = None


class UpsertApplier:
    """Applies upsert batches of one sink to one table.

    Args:
        table: The table (format v2).
        key_columns: The key columns (the table's identifier fields).
        sink_id: The sink's identity in the ledger.
        commit_config: Retry settings.
        lookup_spec: What lookup tasks share (its ``file_prefix`` is extended per attempt).
        run_lookup: How the tasks run.
        lookup_redos: Lookups redone after a conflict before giving up.
        index: The table's key index (``None``: the lookup reads the data files).
    """

    def __init__(
        self,
        table: Table,
        key_columns: Sequence[str],
        sink_id: str,
        commit_config: CommitConfig,
        lookup_spec: LookupSpec,
        run_lookup: LookupRunner,
        lookup_redos: int = DEFAULT_LOOKUP_REDOS,
        index: KeyIndexStore | None = None,
    ) -> None:
        self._committer = RowDeltaCommitter(table, sink_id, commit_config)
        self._planner = LookupPlanner(table.io, key_columns, lookup_spec.table)
        self._key_columns = tuple(key_columns)
        self._sink_id = sink_id
        self._spec = lookup_spec
        self._run_lookup = run_lookup
        self._redos = lookup_redos
        self._index = index

    @property
    def table(self) -> Table:
        return self._committer.table

    def plan_lookup(
        self, keys: pa.Table, batch_id: int, attempt: str, location: str | None = None, redo: int = 0
    ) -> PlannedLookup | None:
        """Refresh the table and plan the lookup of ``keys``; ``None`` when the ledger has the batch.

        Run its tasks and hand both to :meth:`apply` (``first``) to run the lookups of many
        tables in one Spark job.
        """
        metadata_cache.refresh(self.table)
        if ledger.is_committed(self.table, self._sink_id, batch_id):  # a replay: no lookup needed
            logger.info(
                "batch %s of sink %s already committed to %s; skipped",
                batch_id,
                self._sink_id,
                self._spec.table,
            )
            return None
        prefix = f"{self._spec.file_prefix}-{attempt}-r{redo}"
        spec = replace(self._spec, file_prefix=prefix, location=location or self._spec.location)
        if self._index is not None:
            return self._look_up_in_index(self._index, keys, spec)
        plan = self._planner.plan(self.table.metadata, keys)
        return PlannedLookup(plan, spec)

    def _look_up_in_index(self, store: KeyIndexStore, keys: pa.Table, spec: LookupSpec) -> PlannedLookup:
        """The lookup through the key index, rebuilt from the data files when a blob cannot be read."""
        metadata = self.table.metadata
        view = store.at(metadata)
        try:
            result, found = look_up(view, metadata, self._key_columns, keys, spec, store)
        except IndexFormatError as e:
            logger.warning("key index of %s unreadable, rebuilding it: %s", self._spec.table, e)
            view = store.rebuilt(metadata)
            result, found = look_up(view, metadata, self._key_columns, keys, spec, store)
        plan = LookupPlan(view.snapshot_id, (), 0, keys.num_rows)
        return PlannedLookup(plan, spec, result, view, found)

    def _index_commit(
        self, planned: PlannedLookup, data_files: Sequence[DataFileMessage]
    ) -> IndexCommit | None:
        """The key index of the snapshot the batch commits (``None``: no index)."""
        if self._index is None or planned.view is None:
            return None
        step = self._index.step_of_files(self.table.metadata, data_files, [])
        step = replace(step, replaced=planned.found or {})  # what the lookup found, all deleted
        return IndexCommit(self.table, self._index, planned.view, [step])

    def apply(
        self,
        keys: pa.Table,
        data_files: Sequence[DataFileMessage],
        batch_id: int,
        attempt: str,
        location: str | None = None,
        first: tuple[PlannedLookup | None, LookupResult | None] | None = None,
    ) -> UpsertOutcome:
        """Delete the current rows of ``keys`` and add ``data_files``, in one snapshot.

        Args:
            keys: Every key the batch changes (key columns only, one row per key).
            data_files: The batch's new row versions, already written.
            batch_id: The micro-batch.
            attempt: The batch's write attempt (unique per attempt; names its delete files).
            location: The folder for the delete files (``None``: next to each data file).
            first: The first lookup, planned by :meth:`plan_lookup` and run by the caller
                (its result ``None`` when the plan is); ``None``: planned and run here.
                Redos after a conflict always run here.
        """
        batches, attempts = BatchRange(batch_id, batch_id), {batch_id: attempt}
        concurrent = ConcurrentKeys(self.table.io, self._key_columns, keys)  # one per batch: reads cached
        for redo in range(self._redos + 1):
            if redo == 0 and first is not None:
                planned, result = first
            else:
                planned, result = self.plan_lookup(keys, batch_id, attempt, location, redo), None
            if planned is None:
                empty = LookupPlan(None, (), 0, keys.num_rows)
                return UpsertOutcome(RowDeltaOutcome(None, 1, 0, True), empty, LookupReport(), 0, redo)
            if result is None:
                result = planned.result or self._run_lookup(list(planned.plan.tasks), planned.spec)
            plan = planned.plan
            index = self._index_commit(planned, data_files)
            try:
                outcome = self._committer.commit(
                    data_files, result.delete_files, plan.snapshot_id, batches, attempts, concurrent, index
                )
            except RowDeltaConflictError as e:
                delete_uncommitted(self.table, result.delete_files)
                if redo == self._redos:
                    raise
                logger.warning(
                    "batch %s of %s: %s; redoing the lookup (%s of %s)",
                    batch_id,
                    self._spec.table,
                    e,
                    redo + 1,
                    self._redos,
                )
                continue
            if outcome.skipped_replay:
                delete_uncommitted(self.table, result.delete_files)
            paths = () if outcome.skipped_replay else tuple(f.path for f in result.delete_files)
            return UpsertOutcome(outcome, plan, result.report, len(result.delete_files), redo, paths)
        raise AssertionError("unreachable")
