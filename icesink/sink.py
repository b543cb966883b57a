"""The ``foreachBatch`` sink: one micro-batch, step by step, in the order the code runs.

1. table        loaded, or created on first use; keys checked; state recovered  :mod:`icesink.batch.tables`
2. replay       the table has the batch already: skipped                   :mod:`icesink.batch.table_batch`
3. changes      upsert mode: the last change per key, bad changes set aside    :mod:`icesink.batch.changes`
4. schema       new columns and wider types added to the table             :mod:`icesink.schema.coordinator`
5. normalize    the rows aligned to the table's schema, bad ones flagged            :mod:`icesink.normalize`
6. distribute   partition values, the shuffle to the write tasks                 :mod:`icesink.route.router`
7. write        the attempt recorded, then the tasks write data files       :mod:`icesink.batch.write_job`
8. dead letters bad rows to their own table, committed before the data   :mod:`icesink.batch.dead_letters`
9. commit       appended, staged for the cadence, or a row delta; exactly once  :mod:`icesink.batch.commits`
10. maintenance compaction, expiry, orphan removal, in a time budget  :mod:`icesink.maintenance.after_commit`

One loop writes every batch, for one table or many, as Iceberg Kafka Connect's ``writerForTable``
and ``commitToTable`` do: a :class:`BatchPlan` (:mod:`icesink.batch.one_table`, or
:mod:`icesink.batch.routed` with ``route.by`` set) prepares, splits and writes, and
:mod:`icesink.batch.finish` commits, each table through a :class:`~icesink.batch.table_batch.TableBatch`.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar, overload

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import catalog as catalogs
from icesink.batch.changes import ChangeBatch
from icesink.batch.commits import WrittenBatch
from icesink.batch.finish import Finish, IdleListeners
from icesink.batch.key import BatchKey
from icesink.batch.one_table import OneTablePlan
from icesink.batch.routed import RoutedStep
from icesink.batch.source_write import ArrowSource, SourceWrite
from icesink.batch.states import SinkParts, TableStates
from icesink.batch.tables import Tables
from icesink.bounded_waits import server_errors
from icesink.commit.state import state_location
from icesink.config import SinkConfig
from icesink.config_route import route_label
from icesink.errors import ConfigError, SinkClosedError
from icesink.log_context import batch_context, batch_logger
from icesink.metrics import SinkMetrics
from icesink.metrics_server import MetricsServer, export, unexport
from icesink.route.self_check_runs import check_ahead
from icesink.spark_session import sink_id_of
from icesink.write.workers_ahead import start_workers_ahead

__all__ = ["ArrowSource", "IcebergSink"]

logger = batch_logger(__name__)

Prepared = TypeVar("Prepared")


class BatchPlan(Protocol[Prepared]):
    """What the batch loop of :meth:`IcebergSink.__call__` asks of the plan of one table or of many."""

    label: str  # names the sink in its batches' log records

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None: ...

    def prepare(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None
    ) -> AbstractContextManager[Prepared | None]:
        """Inside: the batch's table batches, the tables' locks held; ``None``: nothing left to write."""
        ...

    def changes(self, batch_df: DataFrame, prepared: Prepared) -> ChangeBatch:
        """Upsert mode: the last change per key of each upserted table; else the batch as it is."""
        ...

    def write(self, prepared: Prepared, changes: ChangeBatch) -> WrittenBatch: ...


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
        self._states = TableStates(self.metrics)
        parts = SinkParts(config, self.catalog, self.metrics, self._states)
        self._finish = Finish(parts)
        tables = Tables(parts, self._finish.config_for, (self._finish.dead_letters.table_name,))
        self._one = OneTablePlan(self._finish, tables)
        self._routed = RoutedStep(self._finish, config.table or route_label(config.route), tables)
        self._plan: BatchPlan[Any] = self._routed if config.route.enabled else self._one
        self._idle = IdleListeners(self)
        self._closed = False

    def __getstate__(self) -> dict[str, Any]:
        """Only the configuration travels (Spark Connect pickles the ``foreachBatch`` function): the
        rest is built again where the sink is unpickled; metrics given to the constructor stay behind."""
        return {"config": self.config}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["config"])  # type: ignore[misc]

    @classmethod
    def from_options(cls, options: Mapping[str, Any], metrics: SinkMetrics | None = None) -> IcebergSink:
        """Build a sink from Spark-style string options (see :class:`~icesink.config.SinkConfig`)."""
        return cls(SinkConfig.from_options(options), metrics)

    @overload
    def prepare(self, schema: st.StructType) -> Table: ...

    @overload
    def prepare(self, schema: Mapping[str, st.StructType]) -> dict[str, Table]: ...

    def prepare(self, schema: st.StructType | Mapping[str, st.StructType]) -> Table | dict[str, Table]:
        """Check the stream's schema against the table before the stream starts.

        The table is created if missing, and evolved for new columns and wider types (unless
        ``schema.evolution=off``); the write's Python workers and the self-checks of Spark's
        bucket values start in the background, not in the first batch. A routed sink takes each
        destination value's schema (``{"orders": schema, ...}``) and returns each value's table.

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
        with server_errors(self.config, table=self.config.table or None):
            if isinstance(schema, st.StructType):
                tables: Table | dict[str, Table] = self._one.prepare_schema(schema)
            else:
                tables = self._routed.prepare_schemas(schema)
        if (spark := SparkSession.getActiveSession()) is not None:
            start_workers_ahead(spark)
            if isinstance(tables, Table):  # the bucket values Spark computes for the one table, checked
                check_ahead(spark, tables, self.config.write.distribution_mode)
        return tables

    def prepare_destinations(self, schemas: Mapping[str, st.StructType]) -> frozenset[str]:
        """Routed: the tables of values seen before a batch (:mod:`~icesink.batch.source_write`), planned."""
        self._check_open()
        return self._routed.prepare_destinations(schemas)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: a write of its rows by the source's own tasks
        (:mod:`icesink.batch.source_write`; hand it back in ``ArrowSource.written``), or ``None``."""
        self._check_open()
        return self._plan.source_write(batch_df, batch_id)  # to the one table, or each table known

    def __call__(self, batch_df: DataFrame, batch_id: int, arrow_source: ArrowSource | None = None) -> None:
        """Write one micro-batch (the ``foreachBatch`` function).

        ``arrow_source``: how ``batch_df`` was made in Python, if it was (see :class:`ArrowSource`).

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
        plan = self._plan
        with (
            batch_context(plan.label, key.sink_id, batch_id),
            server_errors(self.config, table=self.config.table or None, batch_id=batch_id),
            plan.prepare(batch_df, key, arrow_source) as batches,  # 1. the tables, loaded or created
        ):
            if batches is None:  # 2. the tables have the batch (or it has no rows): skipped
                return
            changes = plan.changes(batch_df, batches)  # 3. upsert mode: the last change per key
            try:
                done = plan.write(batches, changes)  # 4. schema, 5. normalize, 6. distribute, 7. write
                # 8. dead letters, committed before the data; 9. commit (icesink.batch.finish)
                self._finish.finish(key, done, changes, batch_df.sparkSession)
            finally:
                changes.release()

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
        :class:`~icesink.errors.SinkClosedError`. A staged commit that fails is raised
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
