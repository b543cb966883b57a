"""The row delta commit kind: an upserted table's new rows with the position deletes of the rows they replace.

For the written table batches of one micro-batch, one table or many: each table's lookup is
planned on its own snapshot (on the catalog pool), then the tasks of every table run together
(:func:`~icesink.upsert.lookup_jobs.run_table_lookups`: ONE Spark job, or the driver's process);
a partition gets at most one delete file a batch. Each table's row delta then commits on its own,
with its own ledger; a conflict redoes that table's lookup alone
(:class:`~icesink.upsert.batch.UpsertApplier`). Delete files go to the attempt's folder, named
with its prefix, so that the attempt records settle them after a crash as they settle its data
files. With a commit cadence, :mod:`icesink.batch.staged_row_deltas` commits instead.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence

from pyspark.sql import SparkSession

from icesink.batch.commits import Written, record_row_delta
from icesink.catalog import executor_io_properties
from icesink.commit.ledger import BatchRange
from icesink.commit.recovery import delete_leftovers
from icesink.metrics import SinkMetrics
from icesink.parallel import run_parallel
from icesink.upsert.batch import PlannedLookup, UpsertApplier, UpsertOutcome
from icesink.upsert.key_index_update import KeyIndexStore, key_index_store
from icesink.upsert.lookup import LookupResult, LookupSpec
from icesink.upsert.lookup_jobs import run_table_lookups
from icesink.upsert.messages import LookupTask
from icesink.upsert.row_delta import delete_uncommitted

__all__ = ["RowDeltaCommits"]


def _table_lookups(
    spark: SparkSession, driver_max_files: int
) -> Callable[[list[LookupTask], LookupSpec], LookupResult]:
    """Lookups of one table (a redo's), like the first: :func:`run_table_lookups`."""

    def run(tasks: list[LookupTask], spec: LookupSpec) -> LookupResult:
        return run_table_lookups(spark, [(spec, tasks)], driver_max_files)[0]

    return run


def _result(planned: PlannedLookup | None, ran: Iterator[LookupResult]) -> LookupResult | None:
    """A planned lookup's result: done when planned (the key index), else the next of the job's."""
    if planned is None:
        return None
    return planned.result if planned.result is not None else next(ran)


class RowDeltaCommits:
    """Commits upserted table batches. One per sink, for every batch: each table's key index store (the
    index of its last snapshot and the blobs decoded) lives from one batch to the next, so that a
    batch reads only what changed since the last."""

    def __init__(self, metrics: SinkMetrics) -> None:
        self._metrics = metrics
        self._stores: dict[tuple[str, str], KeyIndexStore] = {}
        self._lock = threading.Lock()

    def commit(self, written: Sequence[Written], spark: SparkSession) -> None:
        """Look up and commit ``written`` (``spark``: the batch's session, where lookup jobs run)."""
        if not written:
            return
        appliers = [self._applier(w, spark) for w in written]
        with contextlib.ExitStack() as timed:  # one lookup for every table: each table's step
            for name in dict.fromkeys(w.batch.name for w in written):
                timed.enter_context(self._metrics.time_step(name, "lookup"))
            firsts = self._look_up(appliers, written, spark)
        run_parallel(
            [
                functools.partial(self._apply, a, w, first)
                for a, w, first in zip(appliers, written, firsts, strict=True)
            ]
        )

    def _look_up(
        self, appliers: Sequence[UpsertApplier], written: Sequence[Written], spark: SparkSession
    ) -> list[tuple[PlannedLookup | None, LookupResult | None]]:
        """Each table's first lookup: planned (through its key index, done then), the rest in ONE job."""
        planned = run_parallel(
            [
                functools.partial(
                    a.plan_lookup, w.keys, w.batch.key.batch_id, w.batch.key.attempt, w.batch.location
                )
                for a, w in zip(appliers, written, strict=True)
            ]
        )
        lookups = [(p.spec, list(p.plan.tasks)) for p in planned if p is not None and p.result is None]
        driver_max_files = min(w.batch.config.upsert.lookup_driver_max_files for w in written)
        ran = iter(run_table_lookups(spark, lookups, driver_max_files) if lookups else [])
        return [(p, _result(p, ran)) for p in planned]

    def _applier(self, written: Written, spark: SparkSession) -> UpsertApplier:
        batch = written.batch
        config = batch.config
        spec = LookupSpec(
            batch.name,
            executor_io_properties(config, batch.table),
            batch.key.batch_prefix,
            config.write.compression_codec,
        )
        return UpsertApplier(
            batch.table,
            config.upsert.key_columns,
            batch.key.sink_id,
            config.commit,
            spec,
            _table_lookups(spark, config.upsert.lookup_driver_max_files),
            index=key_index_store(
                self._stores, self._lock, batch.name, batch.key.sink_id, batch.table, config.upsert
            ),
        )

    def _apply(
        self,
        applier: UpsertApplier,
        written: Written,
        first: tuple[PlannedLookup | None, LookupResult | None],
    ) -> UpsertOutcome:
        """One table's row delta (its lookup redone alone after a conflict), then its attempt ended."""
        batch, files, keys = written.batch, written.files, written.keys
        assert keys is not None and batch.spec is not None
        name, key = batch.name, batch.key
        with self._metrics.time_commit(name, key.sink_id):  # a failed commit is counted
            outcome = applier.apply(keys, files, key.batch_id, key.attempt, batch.location, first)
        if outcome.commit.skipped_replay:
            delete_uncommitted(applier.table, files)
            self._metrics.record_replay(name, key.sink_id)
        else:
            taken = {f.path for f in files} | set(outcome.delete_paths)
            delete_leftovers(
                batch.table.io, batch.location, batch.spec.file_prefix, taken
            )  # failed tasks' files
            self._record(written, keys.num_rows, outcome)
        store = self._stores.get((name, key.sink_id))
        if store is not None:
            self._metrics.record_key_index(name, key.sink_id, store.take_counts())
        batch.end()
        return outcome

    def _record(self, written: Written, keys: int, outcome: UpsertOutcome) -> None:
        """Count and log one committed upsert batch (``keys``: every key it changed)."""
        batch, commit = written.batch, outcome.commit
        deleted = max(0, keys - sum(f.record_count for f in written.files))
        batches = BatchRange(batch.key.batch_id, batch.key.batch_id)
        attempt = (commit.snapshot_id, commit.attempts, commit.conflicts)
        deletes = (deleted, outcome.delete_files)
        name, sink_id, files = batch.name, batch.key.sink_id, written.files
        record_row_delta(self._metrics, name, sink_id, batches, files, attempt, deletes)
