"""The row delta commit kind: an upserted table's new rows and the position deletes of the rows they replace.

For the written table batches of one micro-batch, one table or many, each with the keys
the batch changes on it (:attr:`~sink.batch.commits.Written.keys`):

1. lookup  - each table's lookup planned on its own snapshot (on the catalog pool), then ONE
             Spark job runs the tasks of every table (:func:`~sink.upsert.lookup.run_lookups`):
             the driver reads no data file;
2. commit  - each table's row delta on its own, with its own ledger (on the pool); a
             conflict redoes that table's lookup alone (:class:`~sink.upsert.batch.UpsertApplier`).

Delete files go to the batch attempt's folder of their table, named with its prefix, so
the attempt records settle them after a crash as they settle its data files. Every batch is
committed: a lookup sees committed snapshots only, so a key staged but not committed would
be missed by the next batch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from pyspark.sql import SparkSession

from sink.batch.commits import Written, record_committed
from sink.catalog import executor_io_properties
from sink.commit.ledger import BatchRange
from sink.commit.recovery import delete_leftovers
from sink.metrics import SinkMetrics
from sink.parallel import run_parallel
from sink.upsert.batch import PlannedLookup, UpsertApplier, UpsertOutcome
from sink.upsert.lookup import LookupResult, LookupSpec, run_lookup, run_lookups
from sink.upsert.messages import LookupTask
from sink.upsert.row_delta import delete_uncommitted

__all__ = ["RowDeltaCommits", "lookup_parallelism"]

_DEFAULT_LOOKUP_TASKS = 200  # Spark tasks of a lookup when the session does not say


def lookup_parallelism(spark: SparkSession) -> int:
    """Spark tasks of a lookup job: the session's shuffle partitions."""
    return int(spark.conf.get("spark.sql.shuffle.partitions") or _DEFAULT_LOOKUP_TASKS)


def _spark_lookups(spark: SparkSession) -> Callable[[list[LookupTask], LookupSpec], LookupResult]:
    """Lookups (a redo's) run as Spark jobs of ``spark``."""
    return functools.partial(run_lookup, spark, parallelism=lookup_parallelism(spark))


class RowDeltaCommits:
    """Commits upserted table batches (see the module).

    Args:
        metrics: Where commits, upserted and deleted keys and delete files are recorded.
        spark: The session the lookup jobs run on.
    """

    def __init__(self, metrics: SinkMetrics, spark: SparkSession) -> None:
        self._metrics = metrics
        self._spark = spark

    def commit(self, written: Sequence[Written]) -> None:
        if not written:
            return
        appliers = [self._applier(w) for w in written]
        planned = run_parallel(
            [
                functools.partial(
                    a.plan_lookup, w.keys, w.batch.key.batch_id, w.batch.key.attempt, w.batch.location
                )
                for a, w in zip(appliers, written, strict=True)
            ]
        )
        spark = self._spark
        lookups = [(p.spec, list(p.plan.tasks)) for p in planned if p is not None]
        ran = iter(run_lookups(spark, lookups, lookup_parallelism(spark)))
        firsts = [(p, next(ran) if p is not None else None) for p in planned]
        run_parallel(
            [
                functools.partial(self._apply, a, w, first)
                for a, w, first in zip(appliers, written, firsts, strict=True)
            ]
        )

    def _applier(self, written: Written) -> UpsertApplier:
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
            _spark_lookups(self._spark),
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
        batch.end()
        return outcome

    def _record(self, written: Written, keys: int, outcome: UpsertOutcome) -> None:
        """Count and log one committed upsert batch (``keys``: every key it changed)."""
        batch, metrics = written.batch, self._metrics
        name, sink_id = batch.name, batch.key.sink_id
        upserted = sum(f.record_count for f in written.files)
        deleted = max(0, keys - upserted)
        commit = outcome.commit
        metrics.upserted_keys.labels(name, sink_id).inc(upserted)
        metrics.deleted_keys.labels(name, sink_id).inc(deleted)
        metrics.delete_files.labels(name, sink_id).inc(outcome.delete_files)
        detail = f" ({upserted} keys upserted, {deleted} deleted, {outcome.delete_files} delete files)"
        batches = BatchRange(batch.key.batch_id, batch.key.batch_id)
        record_committed(
            metrics,
            name,
            sink_id,
            batches,
            written.files,
            (commit.snapshot_id, commit.attempts, commit.conflicts),
            detail=detail,
        )
