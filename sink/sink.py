"""The ``foreachBatch`` sink: one micro-batch, step by step, in the order the code runs.

1. table       - load the table (create it on first use), its state  (:mod:`sink.batch.states`)
                 recovered from what a crashed run left
2. replay      - the table has the batch already: skipped           (:mod:`sink.batch.table_batch`)
3. changes     - upsert mode: the last change per key; rows with a  (:mod:`sink.batch.changes`)
                 null key or an unknown op set aside
4. schema      - new columns and wider types added to the table     (:mod:`sink.schema.coordinator`)
5. normalize   - the rows aligned to the table's schema, bad ones   (:mod:`sink.normalize`)
                 flagged
6. distribute  - partition values, the shuffle to the write tasks   (:mod:`sink.route.router`)
7. write       - the attempt recorded, then the executors write     (:mod:`sink.batch.write_job`, on
                 Parquet data files                                   the executors :mod:`sink.write.task`)
8. dead        - bad rows to the dead-letter table, committed        (:mod:`sink.batch.dead_letters`)
   letters       before the data
9. commit      - appended, staged for the commit cadence, or a row  (:mod:`sink.batch.commits`)
                 delta (upsert mode); exactly once by the ledger
10. maintenance - compaction, snapshot expiry, orphan removal, in a (:mod:`sink.batch.maintain`)
                 time budget

With ``route.by`` set, a batch goes to many tables: :mod:`sink.batch.routed` runs the same
steps for all of them at once (one route job, one projection, one write job), each table
through the same :class:`~sink.batch.table_batch.TableBatch` and commit kinds. Every step
is timed and counted (:mod:`sink.metrics`); the flush of staged batches when a query goes
idle is :mod:`sink.batch.idle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from sink import catalog as catalogs
from sink import failpoints
from sink.batch.arrow_source import ArrowSource, fusable
from sink.batch.changes import ChangeBatch, changed_keys
from sink.batch.finish import Finish
from sink.batch.idle import IdleListeners
from sink.batch.key import BatchKey
from sink.batch.routed import RoutedStep
from sink.batch.source_write import SourcePlanner, SourceWrite
from sink.batch.states import TableStates
from sink.batch.table_batch import TableBatch
from sink.batch.write_job import BatchWriter
from sink.bounded_waits import server_errors
from sink.commit.state import state_location
from sink.config import SinkConfig
from sink.config_route import route_label
from sink.errors import ConfigError, SinkClosedError
from sink.log_context import batch_context, batch_logger
from sink.metrics import SinkMetrics
from sink.metrics_server import MetricsServer, export, is_exported, unexport
from sink.normalize import NormalizeOptions, check_normalizes, normalize
from sink.progress import watch_query
from sink.route.self_check_runs import check_ahead
from sink.schema.coordinator import evolve_table
from sink.spark_session import query_id_of, sink_id_of
from sink.upsert.checks import UpsertChecks
from sink.write.workers_ahead import start_workers_ahead

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
        self._states = TableStates(self.metrics)  # per table and sink id: recovered once, staged batches
        self._finish = Finish(config, self.catalog, self.metrics, self._states)  # dead letters, commits
        self._changes = self._finish.changes
        label = config.table or route_label(config.route)  # route.by set: RoutedStep writes the batches
        self._routed = RoutedStep(config, self.catalog, self.metrics, self._finish, label)
        # the source's write to the one table (a routed sink's: RoutedStep's own planner)
        self._sources = SourcePlanner(config, self.catalog, self._finish.config_for, self._states)
        self._normalize_options = NormalizeOptions.from_config(config, self._finish.dead_letters.table_name)
        self._writer = BatchWriter(self.metrics)
        self._upsert = UpsertChecks(config)  # write.mode=upsert: the table's keys; append: no keys
        self._idle = IdleListeners(self)  # with a commit cadence: flush when a query idles or stops
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

    @overload
    def prepare(self, schema: st.StructType) -> Table: ...

    @overload
    def prepare(self, schema: Mapping[str, st.StructType]) -> dict[str, Table]: ...

    def prepare(self, schema: st.StructType | Mapping[str, st.StructType]) -> Table | dict[str, Table]:
        """Check the stream's schema against the table before the stream starts.

        The table is created if missing, and evolved for new columns and wider types
        (unless ``schema.evolution=off``). The write's Python workers and the self-checks
        Spark-computed bucket values need start in the background, not in the first batch.
        A routed sink takes each destination value's schema (``{"orders": schema, ...}``)
        and returns each value's table.

        Raises:
            PartitionSpecError: ``partition-by`` names a missing column or an impossible transform.
            SchemaError: The stream has a column the table cannot take.
            CatalogError: The catalog is unreachable or silent past ``timeout.*``; names it.
            StorageError: The object store is unreachable or silent past ``timeout.*``; names it.
        """
        self._check_open()
        if isinstance(schema, st.StructType) == self.config.route.enabled:
            raise ConfigError(
                f"prepare() of a {'routed' if self.config.route.enabled else 'one-table'} sink was given "
                f"{'one schema' if isinstance(schema, st.StructType) else 'a schema per destination value'}",
                hint="give a routed sink {destination value: schema}, and a one-table sink its one schema",
            )
        if not isinstance(schema, st.StructType):
            with server_errors(self.config):
                tables = self._routed.prepare(schema)
            if (spark := SparkSession.getActiveSession()) is not None:
                start_workers_ahead(spark)
            return tables
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
        """Routed: the tables of values seen before a batch (:mod:`~sink.batch.source_write`), planned."""
        self._check_open()
        return self._routed.prepare_destinations(schemas)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: a write of its rows by the source's own tasks
        (:mod:`sink.batch.source_write`; hand it back in ``ArrowSource.written``), or ``None``."""
        self._check_open()
        if self.config.route.enabled:  # a write to each table known, as the routed step plans it
            return self._routed.source_write(batch_df, batch_id)
        return self._sources.plan(batch_df, batch_id, sink_id_of(batch_df, self.config.sink_id))

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
        by_source = arrow_source.written if arrow_source is not None else None
        attempt = by_source.attempt if by_source is not None else None  # the source's tasks wrote as it
        key = BatchKey.new(sink_id_of(batch_df, self.config.sink_id), batch_id, attempt)
        if self._finish.stages:
            self._idle.listen(batch_df)
        if self.config.route.enabled:  # many tables: the routed story (sink.batch.routed)
            with (
                batch_context(self._routed.label, key.sink_id, batch_id),
                server_errors(self.config, batch_id=batch_id),
            ):
                return self._routed.write_batch(batch_df, key, arrow_source)
        name = self.config.table
        # Every log record of the batch names it; a catalog's or store's failure is named too.
        with (
            batch_context(name, key.sink_id, batch_id),
            server_errors(self.config, table=name, batch_id=batch_id),
        ):
            batch = self._table_batch(batch_df, key)  # 1. the table, loaded or created, recovered
            snapshot_id = batch.table.metadata.current_snapshot_id
            with self.metrics.batch(name, key.sink_id, batch_id, batch.state.query_id, snapshot_id):
                if is_exported(self.metrics):
                    watch_query(batch_df, self.metrics)  # progress metrics, on the query's own session
                with batch.state.lock:
                    if batch.replayed(self.metrics):  # 2. the table has the batch: skipped
                        return
                    changes = self._changes.split_one(batch_df, self.config)  # 3. last change per key
                    try:
                        self._write_batch(batch, changes, None if self._upsert.enabled else arrow_source)
                    finally:
                        changes.release()

    def _table_batch(self, batch_df: DataFrame, key: BatchKey) -> TableBatch:
        """The sink's table batch of ``key``: the table loaded (created on first use) and checked,
        its state recovered from what a crashed run left on first use in this process."""
        name = self.config.table
        table = catalogs.load_table(self.catalog, name)
        if table is None:
            with self.metrics.time_step(name, "schema"):
                table = catalogs.create_table(
                    self.catalog, self.config, self._upsert.stored_schema(batch_df.schema)
                )
        self._upsert.check_table(table)  # upsert mode: before anything is written
        return TableBatch.of(self._states, name, self.config, table, key, query_id_of(batch_df))

    def _write_batch(self, batch: TableBatch, changes: ChangeBatch, arrow_source: ArrowSource | None) -> None:
        """Steps 4 to 9 of the batch's rows (append mode: all of them)."""
        name, batch_df = batch.name, changes.rows
        failpoints.hit("schema")  # 4. schema: new columns and wider types added to the table first
        with self.metrics.time_step(name, "schema"):
            table = batch.evolve(batch_df.schema, self.metrics)
        failpoints.hit("normalize")  # 5. normalize: the rows aligned to the table, bad ones flagged
        with self.metrics.time_step(name, "normalize"):
            normalized = normalize(batch_df, table.schema(), self._normalize_options)
        failpoints.hit("route")  # 6. distribute: the rows shuffled to their write tasks
        with self.metrics.time_step(name, "route"):
            routed = self._writer.distribute(batch, normalized)
        # 7. write (timed inside: the attempt record is written first)
        fusing = arrow_source is not None and fusable(batch_df, table, normalized, routed, arrow_source)
        by_source = arrow_source.written if arrow_source is not None else None
        written, write_counts = self._writer.write(
            batch, normalized, routed, arrow_source if fusing else None, by_source
        )
        # 8. dead letters, committed before the data; 9. commit: a row delta (upsert mode), staged
        # for the cadence, or appended (sink.batch.finish, as for a routed batch's tables)
        keys, flagged = self.config.upsert.key_columns, write_counts.bad_rows > 0
        self._finish.finish(
            batch.key,
            [written],
            write_counts,
            changes,
            lambda: normalized.dead_letters,
            lambda: [changed_keys(table, keys, changes, normalized, flagged)],
            batch_df.sparkSession,
        )

    def flush(self, query_id: str | None = None) -> None:
        """Commit whatever is staged (all sinks, or those of one streaming query).

        Called automatically when a query goes idle or stops, but Spark tells listeners
        of a query's end only after ``awaitTermination()`` returned: call :meth:`close`
        (or this) after it to make the last staged batches visible at once.
        """
        self._check_open()
        self._finish.flush(lambda state: query_id is None or state.query_id == query_id)

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
            self._idle.stop()
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
