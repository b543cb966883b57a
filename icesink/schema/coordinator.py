"""Step 2: evolve a table's schema for what a batch brings, coordinated across writers.

Every streaming query of a driver calls ``foreachBatch`` from its own thread; several
drivers may write the same table. One :class:`SchemaCoordinator` per table and driver
(:func:`coordinator_for`) keeps the table's global schema as last seen and a lock:

1. Each batch diffs its schema against the table it loaded (:func:`diff_schema`),
   without the lock. Nothing new (the batch may be narrower): done, no lock.
2. If the cached global schema is newer and already holds the batch (another query of
   this driver evolved it), the table is refreshed: no lock either.
3. Otherwise the table's lock is taken; the table is refreshed, the diff is made again
   (dropping what someone else already applied) and the rest is committed with
   pyiceberg's ``update_schema``; the cache is updated.

Across processes, safety comes from the catalog's optimistic commit: a schema commit
that loses the race (``CommitFailedException``; pyiceberg 0.12 does not retry schema
commits itself) is retried after a refresh and a new diff, with backoff. New fields
get their ids from the table's ``last-column-id``, so files written under an older
schema keep reading correctly: ids, not names, decide. A renamed column
(:mod:`icesink.schema.renames`) keeps its id, so its older values read under the new name;
a replayed batch, or another writer's batch, finds it renamed and diffs to nothing.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from enum import StrEnum

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.table.update.schema import UpdateSchema
from pyspark.sql import types as st

from icesink.commit.backoff import Backoff
from icesink.config import CommitConfig, SchemaEvolution, SinkConfig
from icesink.errors import CommitConflictError, SchemaError
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.schema.diff import (
    AddColumn,
    MakeOptional,
    SchemaChange,
    WidenType,
    count_by_kind,
    describe,
    diff_schema,
)
from icesink.schema.renames import RenameColumn
from icesink.schema.source_ids import RecordSourceId

logger = batch_logger(__name__)


class SchemaCheck(StrEnum):
    """What a batch's schema check came to (label of ``icesink_schema_checks_total``)."""

    UNCHANGED = "unchanged"  # the table already takes the batch: no lock
    REFRESHED = "refreshed"  # another query of this driver had evolved it: refreshed, no lock
    EVOLVED = "evolved"  # this batch's changes were committed under the lock
    ALREADY_APPLIED = "already_applied"  # under the lock, the refreshed table already had them


@dataclass(frozen=True)
class EvolutionOutcome:
    """What :meth:`SchemaCoordinator.evolve` did.

    Attributes:
        table: The table, refreshed when needed: its schema takes the batch.
        check: How the check ended.
        changes: The changes this call committed.
        conflicts: Schema commits lost to concurrent writers and retried.
    """

    table: Table
    check: SchemaCheck
    changes: tuple[SchemaChange, ...] = ()
    conflicts: int = 0


class SchemaCoordinator:
    """Evolves one table's schema for the batches of every query in this driver.

    Args:
        table_name: The table's identifier (for metrics and logs).
    """

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name
        self._lock = threading.Lock()  # the table's schema lock
        self._cache_lock = threading.Lock()
        self._schema: Schema | None = None

    @property
    def schema(self) -> Schema | None:
        """The table's schema as last seen by any query of this driver."""
        return self._schema

    def evolve(
        self,
        table: Table,
        batch_schema: st.StructType,
        *,
        retry: CommitConfig,
        case_sensitive: bool = False,
        metrics: SinkMetrics | None = None,
        sink_id: str | None = None,
        batch_id: int | None = None,
    ) -> EvolutionOutcome:
        """Make ``table``'s schema take every column of ``batch_schema``.

        Args:
            table: The table as loaded for this batch (refreshed in place when needed).
            batch_schema: The batch's Spark schema.
            retry: Attempts and backoff for schema commits that lose a race.
            case_sensitive: Whether column names must match in case.
            metrics: Where to count lock use, checks and changes.
            sink_id: For logs.
            batch_id: For logs.

        Raises:
            SchemaError: A change cannot be made (an unsupported type, a conflicting
                column), naming the change.
            CommitConflictError: Schema commits kept losing races after every retry.
        """
        changes = diff_schema(table.schema(), batch_schema, case_sensitive=case_sensitive)
        if not changes:
            self._remember(table.schema())
            return self._done(EvolutionOutcome(table, SchemaCheck.UNCHANGED), metrics)
        cached = self._schema
        if (
            cached is not None
            and cached.schema_id != table.schema().schema_id
            and not diff_schema(cached, batch_schema, case_sensitive=case_sensitive)
        ):
            table.refresh()
            if not diff_schema(table.schema(), batch_schema, case_sensitive=case_sensitive):
                self._remember(table.schema())
                return self._done(EvolutionOutcome(table, SchemaCheck.REFRESHED), metrics)
        logger.info(
            "batch %s of sink %s needs %s on %s: taking the schema lock",
            batch_id,
            sink_id,
            describe(changes),
            self.table_name,
        )
        waited_from = time.perf_counter()
        with self._lock:
            if metrics is not None:
                metrics.schema_lock_wait.labels(self.table_name).observe(time.perf_counter() - waited_from)
                metrics.schema_lock_acquisitions.labels(self.table_name).inc()
            outcome = self._apply(table, batch_schema, retry, case_sensitive, metrics)
            self._remember(table.schema(), force=True)
        self._log_outcome(outcome, table, sink_id, batch_id)
        return self._done(outcome, metrics)

    def _log_outcome(
        self, outcome: EvolutionOutcome, table: Table, sink_id: str | None, batch_id: int | None
    ) -> None:
        if outcome.changes:
            logger.info(
                "batch %s of sink %s evolved %s to schema %s: %s (%s conflicts retried)",
                batch_id,
                sink_id,
                self.table_name,
                table.schema().schema_id,
                describe(list(outcome.changes)),
                outcome.conflicts,
            )
        else:
            logger.info(
                "batch %s of sink %s: another writer had already evolved %s (schema %s)",
                batch_id,
                sink_id,
                self.table_name,
                table.schema().schema_id,
            )

    def _apply(
        self,
        table: Table,
        batch_schema: st.StructType,
        retry: CommitConfig,
        case_sensitive: bool,
        metrics: SinkMetrics | None,
    ) -> EvolutionOutcome:
        """Refresh, diff again, commit what is still missing; retry lost races (lock held)."""
        conflicts = 0
        backoff = Backoff(retry)
        for attempt in backoff.attempts():
            table.refresh()
            pending = diff_schema(table.schema(), batch_schema, case_sensitive=case_sensitive)
            if not pending:
                return EvolutionOutcome(table, SchemaCheck.ALREADY_APPLIED, (), conflicts)
            try:
                with table.update_schema(case_sensitive=True) as update:  # paths carry the table's names
                    for change in pending:
                        _stage(update, change)
            except CommitFailedException as e:
                conflicts += 1
                if metrics is not None:
                    metrics.schema_commit_conflicts.labels(self.table_name).inc()
                logger.warning(
                    "schema commit to %s lost a race (attempt %s of %s): %s",
                    self.table_name,
                    attempt,
                    backoff.tries,
                    e,
                )
                continue
            except (ValueError, TypeError) as e:
                raise SchemaError(
                    f"cannot apply schema changes [{describe(pending)}]: {type(e).__name__}: {e}",
                    table=self.table_name,
                    hint="cast the column in the query to the table's type, or set schema.evolution=off "
                    "to send values that do not convert to the dead-letter table",
                ) from e
            return EvolutionOutcome(table, SchemaCheck.EVOLVED, tuple(pending), conflicts)
        raise CommitConflictError(
            f"schema commit still conflicting after {backoff.tries} attempts",
            table=self.table_name,
            hint="raise commit.retry.num-retries or reduce the number of writers changing the schema at once",
        )

    def _remember(self, schema: Schema, force: bool = False) -> None:
        with self._cache_lock:
            if force or self._schema is None or schema.schema_id > self._schema.schema_id:
                self._schema = schema

    def _done(self, outcome: EvolutionOutcome, metrics: SinkMetrics | None) -> EvolutionOutcome:
        if metrics is not None:
            metrics.schema_checks.labels(self.table_name, outcome.check.value).inc()
            for kind, n in count_by_kind(list(outcome.changes)).items():
                metrics.schema_changes.labels(self.table_name, kind).inc(n)
        return outcome


def _stage(update: UpdateSchema, change: SchemaChange) -> None:
    if isinstance(change, AddColumn):
        update.add_column(change.path, change.field_type, doc=change.doc, required=False)
    elif isinstance(change, WidenType):
        update.update_column(change.path, field_type=change.to_type)
    elif isinstance(change, MakeOptional):
        update.make_column_optional(change.path)
    elif isinstance(change, RenameColumn):
        update.rename_column(change.path, change.new)  # same field id: the data stays
    elif isinstance(change, RecordSourceId):
        update.update_column(change.path, doc=change.doc)


_COORDINATORS: dict[tuple[str, str], SchemaCoordinator] = {}
_COORDINATORS_LOCK = threading.Lock()


def coordinator_for(config: SinkConfig) -> SchemaCoordinator:
    """The driver's coordinator of ``config.table`` in ``config``'s catalog (shared by every sink)."""
    properties = config.catalog.plain_properties()
    where = "|".join((config.catalog.name, properties.get("uri", ""), properties.get("warehouse", "")))
    key = (hashlib.sha256(where.encode()).hexdigest(), config.table)
    with _COORDINATORS_LOCK:
        coordinator = _COORDINATORS.get(key)
        if coordinator is None:
            coordinator = _COORDINATORS[key] = SchemaCoordinator(config.table)
        return coordinator


def evolve_table(
    config: SinkConfig,
    table: Table,
    schema: st.StructType,
    metrics: SinkMetrics,
    sink_id: str | None,
    batch_id: int | None,
) -> Table:
    """``table``, its schema evolved by the driver's coordinator to take ``schema`` (unless
    ``schema.evolution=off``): the schema step of a sink's batch."""
    if config.table_schema.evolution is SchemaEvolution.OFF:
        return table
    outcome = coordinator_for(config).evolve(
        table,
        schema,
        retry=config.commit,
        case_sensitive=config.table_schema.case_sensitive,
        metrics=metrics,
        sink_id=sink_id,
        batch_id=batch_id,
    )
    return outcome.table
