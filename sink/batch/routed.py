"""The routed micro-batch (``route.by`` = ``topic`` | ``field``): many tables from one stream.

What :class:`~sink.sink.IcebergSink` hands a batch to when routing is on. The steps of
:mod:`sink.sink`, for every destination table at once:

0. by source - the source's tasks may have written the rows of the   (:mod:`sink.batch.source_write`)
               tables of earlier batches: the batch is the rest
1. route     - the batch's destination values and their non-null    (:mod:`sink.destinations.resolve`)
               columns: ONE Spark job; each value named a table      (:mod:`sink.destinations.naming`)
2. schema    - per table: load or create it with its own options    (:mod:`sink.batch.routed_tables`,
               (within route.max-tables, for one value: others are    :mod:`sink.destinations.owners`,
               dead letters), settle crashed attempts, skip it when   :mod:`sink.schema.coordinator`)
               its ledger has the batch, evolve it with its own columns only
   changes   - upserted tables: the last change per key, rejected    (:mod:`sink.batch.changes`)
               changes set aside (one counting job)
3. normalize - ONE projection for every table                        (:mod:`sink.destinations.projection`)
4. write     - ONE write job; each task splits rows by table          (:mod:`sink.batch.routed_write`)
5. dead      - bad, unroutable and rejected rows, one commit, before  (:mod:`sink.batch.dead_letters`)
   letters     the data
6. commit    - each table on its own (its files from 0 and 4), with   (:mod:`sink.commit.committer`)
               its own exactly-once ledger; upserted tables after ONE (:mod:`sink.batch.routed_keys`)
               key job and ONE lookup job
7. maintain  - the committed tables' maintenance, in one time budget  (:mod:`sink.batch.finish`)

The number of Spark jobs of a batch does not grow with its number of tables (none after
the source's when its tasks wrote every row); the catalog and storage calls of steps 2, 4
(the attempt records) and 6 do, a few per table on a small thread pool. A crash between
two tables' commits replays the batch: the tables that have it are skipped in step 2 and
their rows left out of the write. Routed writes are shuffled as write.distribution-mode asks.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from sink.batch.arrow_source import ArrowSource
from sink.batch.changes import ChangeBatch
from sink.batch.commits import Written
from sink.batch.key import BatchKey
from sink.batch.routed_keys import routed_changed_keys
from sink.batch.routed_tables import PreparedTables, RoutedTables
from sink.batch.routed_write import RoutedWrites
from sink.batch.source_write import SourcePlanner, SourceWrite, record_source_files, source_targets
from sink.batch.table_batch import RoutedTarget
from sink.config import SinkConfig
from sink.destinations.destination_table import DestinationTable
from sink.destinations.naming import DestinationNames
from sink.destinations.projection import SKIPPED, ProjectionOptions, RoutedProjection, log_unroutable, project
from sink.destinations.resolve import DestinationValue, destination_value, quoted, resolve_batch, route_column
from sink.errors import ConfigError
from sink.log_context import batch_logger
from sink.metrics import SinkMetrics
from sink.parallel import run_parallel
from sink.spark_session import query_id_of, sink_id_of
from sink.write.messages import RowCounts, WriteResult, files_of

if TYPE_CHECKING:
    from sink.batch.finish import Finish

logger = batch_logger(__name__)


class RoutedStep:
    """Writes routed micro-batches for one sink configuration.

    Args:
        config: The routed sink's configuration.
        catalog: The sink's catalog.
        metrics: The sink's metrics (each table under its own ``table`` label).
        finish: The sink's commits: its dead letters, table states, tables' options and commit kinds.
        label: What names the sink where no single table does (shared steps, unroutable rows).
    """

    def __init__(
        self,
        config: SinkConfig,
        catalog: Catalog,
        metrics: SinkMetrics,
        finish: Finish,
        label: str,
    ) -> None:
        self._config = config
        self._states = states = finish.states
        self._metrics = metrics
        self._finish = finish
        self._dead_letter_table = dead_letter_table = finish.dead_letters.table_name
        self.label = label
        self._names = DestinationNames(config.route, reserved=(dead_letter_table,))
        self._options = options = finish.options
        self._tables = RoutedTables(config, catalog, metrics, options, states, (dead_letter_table,))
        self._upserts = finish.changes
        self._writes = RoutedWrites(config.write.memory_budget_bytes, metrics, label)
        self._lock = threading.Lock()
        self._sink_locks: dict[str, threading.Lock] = {}
        self._unsettled: dict[str, SourceWrite] = {}  # sink id -> its planned write not yet written
        self._by_source = SourcePlanner(config, catalog, options.config_for, states, self._tables)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: its tasks' write to known tables (:mod:`.source_write`)."""
        sink_id = sink_id_of(batch_df, self._config.sink_id)
        with self._lock:
            sink_lock = self._sink_locks.setdefault(sink_id, threading.Lock())
        with sink_lock:
            failed = self._unsettled.pop(sink_id, None)  # its batch failed before reaching the sink
            if failed is not None:
                self._states.forget(failed.tables, sink_id)
            planned = self._by_source.plan(batch_df, batch_id, sink_id)
            if planned is not None:
                self._unsettled[sink_id] = planned
            return planned

    def prepare(self, schemas: Mapping[str, st.StructType]) -> dict[str, Table]:
        """Before the stream starts: each destination value's table, created or evolved for its schema.

        Raises:
            ConfigError: A value names no table, or may not have its table.
        """
        tables_of = self._names.tables_of(schemas)
        for value, name in tables_of.items():
            if name is None:
                raise ConfigError(
                    f"destination value {value!r} names no table: {self._names.describe_unroutable(value)}",
                    hint="give prepare() the values the stream routes (route.tables' keys, or values "
                    "the route.table-template makes a table name of)",
                )
        prepare = [
            functools.partial(self._tables.prepare_table, n, v, schemas[v])
            for v, n in tables_of.items()
            if v and n
        ]
        tables = dict(zip(schemas, run_parallel(prepare), strict=True))
        self._by_source.learn(tables_of)  # their rows may be written by the source's tasks from now on
        return tables

    def prepare_destinations(self, schemas: Mapping[str, st.StructType]) -> frozenset[str]:
        """The tables of the values the source saw, before a batch; the values planned from now on."""
        if schemas:
            self._by_source.prepare(self._names.tables_of(schemas), schemas)
        return self._by_source.known()

    def write_batch(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None = None
    ) -> None:
        """Write one micro-batch to its tables (the steps of this module's docstring).

        When ``arrow_source.written``, the source's tasks wrote some of the batch's rows
        (:mod:`sink.batch.source_write`); ``batch_df`` holds the rest.
        """
        by_source = arrow_source.written if arrow_source is not None else None
        sink_id = key.sink_id
        with self._lock:
            sink_lock = self._sink_locks.setdefault(sink_id, threading.Lock())
        with sink_lock, self._metrics.batch(self.label, sink_id, key.batch_id, query_id_of(batch_df)):
            self._unsettled.pop(sink_id, None)
            try:
                self._write_batch(batch_df, key, arrow_source)
            except BaseException:
                if by_source is not None:
                    self._states.forget(by_source.tables, sink_id)
                raise

    def _write_batch(self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None) -> None:
        by_source = arrow_source.written if arrow_source is not None else None
        if by_source is not None and by_source.remaining_rows == 0:  # the source's tasks wrote every row
            position, found, tables_of = -1, [], {}
        else:
            case_sensitive = self._config.table_schema.case_sensitive
            position = route_column(batch_df.schema, self._config.route, case_sensitive)
            with self._metrics.time_step(self.label, "route"):  # 1. the ONE job finding the destinations
                made_by = (arrow_source.df, arrow_source.function) if arrow_source is not None else None
                found = resolve_batch(batch_df, position, made_by)
                tables_of = self._names.tables_of(d.value for d in found)
        prepared = self._tables.prepare(found, tables_of, batch_df.schema, key, query_id_of(batch_df))  # 2.
        routed = {v: None if v in prepared.refused else n for v, n in tables_of.items()}
        configs = {d.value: self._options.config_for(n) for d in found if d.value and (n := routed[d.value])}
        upserted = {value: config for value, config in configs.items() if config.upsert.enabled}
        changes = ChangeBatch(batch_df)
        if upserted:  # upserted tables: the last change per key
            dest = destination_value(F.col(quoted(batch_df.columns[position])))
            changes = self._upserts.split(batch_df, dest, upserted)
        try:
            self._write_routed(changes, found, routed, prepared, position, key, by_source)
        finally:
            changes.release()
        self._by_source.learn(routed)

    def _write_routed(
        self,
        changes: ChangeBatch,
        found: list[DestinationValue],
        tables_of: dict[str | None, str | None],
        prepared: PreparedTables,
        position: int,
        key: BatchKey,
        by_source: SourceWrite | None,
    ) -> None:
        batch_df, targets = changes.rows, prepared.targets
        sink_id, batch_id = key.sink_id, key.batch_id
        indexes = {v: t.index for t in targets for v in t.values} | dict.fromkeys(prepared.skipped, SKIPPED)
        unroutable = [d for d in found if tables_of[d.value] is None]
        refused = prepared.refused
        reasons = {d.value: self._names.reason(d.value, refused) for d in unroutable if d.value is not None}
        written = source_targets(
            by_source, targets, self._options.config_for, key, self._states
        )  # the source's alone
        if not targets and not unroutable and not written:
            logger.info("batch %s of sink %s: every table already has it (or it is empty)", batch_id, sink_id)
            if not found and by_source is None:  # an empty batch: the source has caught up
                self._finish.flush(lambda state: state.sink_id == sink_id, last_batch_id=batch_id)
            return
        log_unroutable(unroutable, reasons, self._dead_letter_table, sink_id, batch_id)
        projection = None
        if targets or unroutable:
            with self._metrics.time_step(self.label, "normalize"):  # 3. the ONE projection
                tables = [DestinationTable(t.index, t.name, t.table.schema(), t.columns) for t in targets]
                options = ProjectionOptions.of(self._config, position, self.label)
                projection = project(batch_df, tables, indexes, reasons, options)
        try:
            self._write_and_commit(projection, changes, position, targets, written, key, by_source)
        except BaseException:
            self._states.forget((t.name for t in targets + written), sink_id)
            raise

    def _write_and_commit(
        self,
        projection: RoutedProjection | None,
        changes: ChangeBatch,
        position: int,
        targets: list[RoutedTarget],
        written: list[RoutedTarget],
        key: BatchKey,
        by_source: SourceWrite | None,
    ) -> None:
        """Steps 4 to 6; ``projection`` is ``None`` when the source's tasks wrote every row."""
        result = WriteResult([], RowCounts(0, 0))
        if projection is not None:
            result = self._writes.write(projection, targets, key, by_source)
        files, counts = result.files, result.counts
        if by_source is not None:
            record_source_files(by_source, self._metrics)
            files, counts = by_source.joined(files, counts)
        upserted = [t for t in targets if t.config.upsert.enabled]

        def bad_rows() -> DataFrame:  # called only when the write found some: a projection ran
            assert projection is not None
            return projection.dead_letters()

        def changed_keys() -> list[pa.Table]:  # upserted tables: ONE key job, then a row delta each
            assert projection is not None
            route, case_sensitive = changes.rows.columns[position], self._config.table_schema.case_sensitive
            keys = routed_changed_keys(upserted, projection, changes.deletes, route, case_sensitive)
            return [keys[t.index] for t in upserted]

        self._finish.finish(  # 5. dead letters, 6. each table's commit
            key,
            [Written(t.batch, files_of(files, t.name)) for t in targets + written],
            counts,
            changes,
            bad_rows,
            changed_keys,
            changes.rows.sparkSession,
        )
