"""The ``foreachBatch`` sink: one micro-batch, step by step.

0. changes    - upsert mode: the last change per key, rows   (:mod:`sink.upsert_step`)
                with a null key or an unknown op set aside
1. normalize  - align the batch to the table's schema, bad  (:mod:`sink.normalize`,
                rows to the dead-letter table                 :mod:`sink.deadletter`)
2. schema     - create the table on first use, evolve it    (:mod:`sink.catalog`,
                for new columns and wider types first         :mod:`sink.schema.coordinator`)
3. route      - partition values, shuffle to write tasks    (:mod:`sink.route.router`)
4. write      - executors write Parquet data files          (:mod:`sink.write_step`, on
                                                              the executors :mod:`sink.write.task`)
5. stage      - hold the files until the policy commits     (:mod:`sink.staged_commit`)
6. commit     - one atomic snapshot, exactly once           (:mod:`sink.staged_commit`,
                                                              :mod:`sink.commit.committer`)
7. metrics    - every step is counted and timed             (:mod:`sink.metrics`)

With ``route.by`` set, a batch goes to many tables: :mod:`sink.routed_step` runs these
steps for all of them at once (one route job, one projection, one write job, a commit per table).
In upsert mode, 5 and 6 are one: the batch's data files and the position deletes of
the rows they replace or delete, committed at once (:mod:`sink.upsert_step`).

:meth:`IcebergSink._write_batch` is that list as code: one call per step, each taking
what the step before returned. The state kept per sink id is in :mod:`sink.sink_state`,
the flush of staged batches when a query goes idle in :mod:`sink.idle_listener`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from sink import catalog as catalogs
from sink import failpoints
from sink.arrow_source import ArrowSource, fusable
from sink.bounded_waits import server_errors
from sink.commit import ledger
from sink.commit.staging import StagingArea
from sink.commit.state import state_location
from sink.config import SinkConfig
from sink.config_route import route_label
from sink.deadletter import DeadLetterQueue, dead_letter_table_name
from sink.errors import ConfigError, SinkClosedError
from sink.idle_listener import FlushOnIdle, listen_for_idle, stop_listening
from sink.log_context import batch_context, batch_logger
from sink.metrics import SinkMetrics
from sink.metrics_server import MetricsServer, export, is_exported, unexport
from sink.normalize import NormalizedBatch, NormalizeOptions, check_normalizes, normalize
from sink.progress import watch_query
from sink.route.routed import RoutedBatch
from sink.route.router import BucketRouter
from sink.route.self_check_runs import check_ahead
from sink.routed_step import RoutedStep
from sink.schema.coordinator import evolve_table
from sink.sink_state import SinkState, query_id_of, sink_id_of
from sink.source_write import SourceWrite, plan_source_write
from sink.staged_commit import StagedCommits
from sink.upsert_step import ChangeBatch, UpsertStep
from sink.write.workers_ahead import start_workers_ahead
from sink.write_step import BatchWriter

__all__ = ["ArrowSource", "IcebergSink"]

logger = batch_logger(__name__)


class IcebergSink:
    """Writes each micro-batch of a streaming query to an Iceberg table, exactly once.

    Use as ``df.writeStream.foreachBatch(IcebergSink(config)).start()``. One instance may
    serve several streaming queries at once (each calls it from its own thread); each
    query gets its own sink id, so their replay checks stay apart.

    Args:
        config: The validated configuration.
        metrics: Where to record metrics (a private registry by default). With
            ``metrics.port`` or ``metrics.pushgateway-url`` set, they are served or pushed,
            together with every other exporting sink of the process.

    Raises:
        CatalogError: The catalog cannot be loaded (checked at construction).
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics | None = None) -> None:
        self.config = config
        write_target, max_tables = config.write.target_file_size_bytes, config.metrics.max_tables
        self.metrics = metrics or SinkMetrics(target_file_size_bytes=write_target, max_tables=max_tables)
        self.metrics_server: MetricsServer | None = export(self.metrics, config.metrics)
        self.catalog: Catalog = catalogs.open_catalog(config)
        state_location(config)  # where the sink's bookkeeping goes: checked at start-up
        self._dead_letters = DeadLetterQueue(config, self.catalog, self.metrics)
        label = config.table or route_label(config.route)  # route.by set: RoutedStep writes the batches
        self._routed = RoutedStep(config, self.catalog, self.metrics, self._dead_letters, label)
        self._normalize_options = NormalizeOptions.from_config(config, dead_letter_table_name(config))
        self._writer = BatchWriter(config, self.metrics)
        self._commits = StagedCommits(config, self.metrics)
        self._upsert = UpsertStep(config, self.metrics)  # write.mode=upsert; a no-op otherwise
        self._lock = threading.Lock()
        self._states: dict[str, SinkState] = {}
        self._listening: set[str] = set()
        self._listeners: list[tuple[SparkSession, FlushOnIdle]] = []
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        """Only the configuration travels (Spark Connect pickles the ``foreachBatch`` function): the
        rest is built again where the sink is unpickled; metrics given to the constructor stay behind."""
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metrics: SinkMetrics | None = None) -> IcebergSink:
        """Build a sink from Spark-style string options (see :class:`~sink.config.SinkConfig`)."""
        return cls(SinkConfig.from_options(options), metrics)

    def prepare(self, schema: st.StructType) -> Table:
        """Check the stream's schema against the table before the stream starts.

        The table is created if missing, and evolved for new columns and wider types
        (unless ``schema.evolution=off``). The write's Python workers and the self-checks
        Spark-computed bucket values need start in the background, not in the first batch.

        Raises:
            PartitionSpecError: ``partition-by`` names a missing column or an impossible transform.
            SchemaError: The stream has a column the table cannot take.
            CatalogError: The catalog is unreachable or silent past ``timeout.*``; names it.
            StorageError: The object store is unreachable or silent past ``timeout.*``; names it.
        """
        self._check_open()
        if self.config.route.enabled:
            raise ConfigError("prepare() needs one table; a routed sink creates its tables on first sight")
        schema = self._upsert.stored_schema(schema)
        with server_errors(self.config, table=self.config.table):
            table = catalogs.load_table(self.catalog, self.config.table)
            if table is None:
                table = catalogs.create_table(self.catalog, self.config, schema)
            self._upsert.check_table(table)
            table = evolve_table(self.config, table, schema, self.metrics, sink_id=None, batch_id=None)
        check_normalizes(schema, table.schema(), self._normalize_options)
        if (spark := SparkSession.getActiveSession()) is not None:
            start_workers_ahead(spark)
            check_ahead(spark, table, self.config.write.distribution_mode)
        return table

    def prepare_destinations(self, schemas: Mapping[str, st.StructType]) -> frozenset[str]:
        """Routed: the tables of values seen before a batch (:mod:`sink.routed_source`); values planned."""
        self._check_open()
        return self._routed.prepare_destinations(schemas)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: a write of its rows by the source's own tasks
        (:mod:`sink.source_write`; hand it back in ``ArrowSource.written``), or ``None``."""
        self._check_open()
        if self.config.route.enabled:  # a write to each table known (sink.routed_source)
            return self._routed.source_write(batch_df, batch_id)
        return plan_source_write(
            self.config, self.catalog, batch_df, batch_id, self._state, self._writer.write_spec
        )

    def __call__(self, batch_df: DataFrame, batch_id: int, arrow_source: ArrowSource | None = None) -> None:
        """Write one micro-batch (the ``foreachBatch`` function).

        ``arrow_source``, from callers that made ``batch_df`` in Python, says how: the
        write may then run that Python function inside its own tasks (see :class:`ArrowSource`).

        Raises:
            CatalogError: The catalog was unreachable or silent past ``timeout.*`` (named);
                the next batch, or the query restarted, goes on where this one stopped.
            StorageError: The same of the object store.
        """
        self._check_open()
        sink_id = sink_id_of(batch_df, self.config.sink_id)
        if self.config.route.enabled:  # many tables: the routed story (sink.routed_step)
            with (
                batch_context(self._routed.label, sink_id, batch_id),
                server_errors(self.config, batch_id=batch_id),
            ):
                return self._routed.write_batch(batch_df, batch_id, sink_id, arrow_source)
        name = self.config.table
        # Every log record of the batch names it; a catalog's or store's failure is named too.
        with (
            batch_context(name, sink_id, batch_id),
            server_errors(self.config, table=name, batch_id=batch_id),
        ):
            table = catalogs.load_table(self.catalog, name)
            if table is None:
                with self.metrics.time_step(name, "schema"):
                    table = catalogs.create_table(
                        self.catalog, self.config, self._upsert.stored_schema(batch_df.schema)
                    )
            self._upsert.check_table(table)  # upsert mode: before anything is written
            state = self._state(table, sink_id, batch_df)
            snapshot_id = table.metadata.current_snapshot_id
            with self.metrics.batch(name, sink_id, batch_id, state.query_id, snapshot_id):
                if is_exported(self.metrics):
                    watch_query(batch_df, self.metrics)  # progress metrics, on the query's own session
                with state.lock:
                    self._write_batch(batch_df, batch_id, table, state, arrow_source)

    def _write_batch(
        self,
        batch_df: DataFrame,
        batch_id: int,
        table: Table,
        state: SinkState,
        arrow_source: ArrowSource | None = None,
    ) -> None:
        """One micro-batch: the numbered steps of this module's docstring, in order."""
        name, sink_id = self.config.table, state.sink_id
        if ledger.is_committed(table, sink_id, batch_id) or state.staging.contains(batch_id):
            logger.info("batch %s of sink %s already committed to %s: skipped", batch_id, sink_id, name)
            self.metrics.record_replay(name, sink_id)
            return
        # 0. changes (upsert mode): the last change per key; rejected changes set aside
        changes = self._upsert.split(batch_df)
        try:
            fusable_source = None if self._upsert.enabled else arrow_source  # its rows are not changes
            self._write_changes(changes, batch_id, table, state, fusable_source)
        finally:
            changes.release()

    def _write_changes(
        self,
        changes: ChangeBatch,
        batch_id: int,
        table: Table,
        state: SinkState,
        arrow_source: ArrowSource | None,
    ) -> None:
        """Steps 1 to 7 of the batch's rows (append mode: all of them)."""
        name, sink_id, batch_df = self.config.table, state.sink_id, changes.rows
        # 2. schema, before 1. normalize: new columns and wider types are added to the table first
        failpoints.hit("schema")
        with self.metrics.time_step(name, "schema"):
            table = evolve_table(self.config, table, batch_df.schema, self.metrics, sink_id, batch_id)
        # 1. normalize
        failpoints.hit("normalize")
        with self.metrics.time_step(name, "normalize"):
            normalized = normalize(batch_df, table.schema(), self._normalize_options)
        # 3. route
        failpoints.hit("route")
        with self.metrics.time_step(name, "route"):
            routed = self._route(table, state, batch_id, normalized)
        # 4. write (timed inside: the attempt record is written first)
        fusing = arrow_source is not None and fusable(batch_df, table, normalized, routed, arrow_source)
        fused = arrow_source if fusing else None
        by_source = arrow_source.written if arrow_source is not None else None
        written = self._writer.write(table, state, batch_id, normalized, routed, fused, by_source)
        # 1b. dead letters: committed before the batch's data, so a replay cannot repeat them.
        rows = sum(f.record_count for f in written.files)
        dead_letters, counts = self._upsert.dead_letters(changes, normalized, written.counts)
        if not self._dead_letters.deliver(dead_letters, sink_id, batch_id, rows, counts).skipped_replay:
            self._upsert.count_rejected(changes)
        if self._upsert.enabled:  # 5 and 6 in one: the row delta, committed at once
            self._upsert.commit(table, sink_id, changes, normalized, written)
            return
        # 5. stage
        boundary = self._commits.stage(state, written)
        # 6. commit, and 7. its metrics
        self._commits.commit_if_due(table, state, written, boundary)
        failpoints.hit("commit.after")

    def _route(
        self, table: Table, state: SinkState, batch_id: int, normalized: NormalizedBatch
    ) -> RoutedBatch:
        """Step 3: the batch's rows distributed to their write tasks."""
        router = BucketRouter.for_table(
            table,
            self.config.write.distribution_mode,
            state.routing,
            self._writer.target_file_size(table),
            table_name=self.config.table,
            sink_id=state.sink_id,
            batch_id=batch_id,
        )
        return router.route(normalized.rows)

    def flush(self, query_id: str | None = None) -> None:
        """Commit whatever is staged (all sinks, or those of one streaming query).

        Called automatically when a query goes idle or stops, but Spark tells listeners
        of a query's end only after ``awaitTermination()`` returned: call :meth:`close`
        (or this) after it to make the last staged batches visible at once.
        """
        self._check_open()
        with self._lock:
            states = [s for s in self._states.values() if query_id is None or s.query_id == query_id]
        for state in states:
            with state.lock, server_errors(self.config, table=self.config.table):
                if state.staging.batches:
                    table = self.catalog.load_table(self.config.table)
                    self._commits.commit_staged(table, state)

    def _state(self, table: Table, sink_id: str, batch_df: DataFrame) -> SinkState:
        """The state of ``sink_id``; on first use, settle what a crashed run left behind."""
        with self._lock:
            state = self._states.get(sink_id)
            if state is not None:
                return state
            staging = StagingArea.for_sink(self.config, table, sink_id)
            state = SinkState(sink_id, query_id_of(batch_df), staging)
            with state.lock:
                self._commits.recover(table, state)
            self._states[sink_id] = state  # only once recovered: a failed recovery runs again
        if self._commits.stages:
            added = listen_for_idle(self, batch_df, self._listening, self._lock)
            if added is not None:
                self._listeners.append(added)
        return state

    def close(self) -> None:
        """Commit what is staged, stop exporting metrics, release the catalog.

        Safe to call twice; any other use of the sink afterwards raises
        :class:`~sink.errors.SinkClosedError`. A staged commit that fails is raised
        after the rest is released: its batches stay staged for the next run.
        """
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            stop_listening(self._listeners)
            unexport(self.metrics)
            self.metrics_server = None
            catalogs.close_catalog(self.catalog)
            logger.info("sink of %s closed", self.config.table)

    def __enter__(self) -> IcebergSink:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise SinkClosedError(
                "the sink is closed",
                table=self.config.table,
                hint="build a new IcebergSink (one per streaming job), and close it after awaitTermination()",
            )
