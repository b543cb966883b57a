"""The routed micro-batch (``route.by`` = ``topic`` | ``field``): many tables from one stream.

What :class:`~sink.sink.IcebergSink` hands a batch to when routing is on. The steps of
:mod:`sink.sink`, for every destination table at once:

0. by source - the source's tasks may have written the rows of the   (:mod:`sink.routed_source`)
               tables of earlier batches: the batch is the rest
1. route     - the batch's destination values and their non-null    (:mod:`sink.destinations.resolve`)
               columns: ONE Spark job; each value named a table      (:mod:`sink.destinations.naming`)
2. schema    - per table: load or create it with its own options    (:mod:`sink.routed_tables`,
               (within route.max-tables, for one value: others are    :mod:`sink.destinations.owners`,
               dead letters), settle crashed attempts, skip it when   :mod:`sink.schema.coordinator`)
               its ledger has the batch, evolve it with its own columns only
   changes   - upserted tables: the last change per key, rejected    (:mod:`sink.routed_upserts`)
               changes set aside (one counting job)
3. normalize - ONE projection for every table                        (:mod:`sink.destinations.projection`)
4. write     - ONE write job; each task splits rows by table          (:mod:`sink.routed_write`)
5. dead      - bad, unroutable and rejected rows, one commit, before  (:mod:`sink.deadletter`)
   letters     the data
6. commit    - each table on its own (its files from 0 and 4), with   (:mod:`sink.commit.committer`)
               its own exactly-once ledger; upserted tables after ONE (:mod:`sink.routed_upserts`)
               key job and ONE lookup job

The number of Spark jobs of a batch does not grow with its number of tables (none after
the source's when its tasks wrote every row); the catalog and storage calls of steps 2, 4
(the attempt records) and 6 do, a few per table on a small thread pool. A crash between
two tables' commits replays the batch: the tables that have it are skipped in step 2 and
their rows left out of the write. Routed writes are shuffled as write.distribution-mode asks.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from sink.arrow_source import ArrowSource
from sink.config import SchemaEvolution, SinkConfig
from sink.deadletter import DeadLetterQueue
from sink.destinations.destination_table import DestinationTable
from sink.destinations.naming import DestinationNames, dead_letter_reason
from sink.destinations.projection import (
    NULL_VALUE_REASON,
    SKIPPED,
    ProjectionOptions,
    RoutedProjection,
    project,
)
from sink.destinations.resolve import DestinationValue, resolve, resolve_in_tasks, route_column
from sink.destinations.table_options import TableOptions
from sink.log_context import batch_logger
from sink.metrics import SinkMetrics
from sink.routed_commit import commit_tables
from sink.routed_source import RoutedSourcePlanner, record_source_files, source_targets
from sink.routed_tables import PreparedTables, RoutedTables
from sink.routed_upserts import RoutedChanges, RoutedUpserts
from sink.routed_write import RoutedTarget, RoutedWrites
from sink.schema.primitives import BadRecordReason
from sink.sink_state import query_id_of, sink_id_of
from sink.source_write import SourceWrite
from sink.write.messages import RowCounts, WriteResult

logger = batch_logger(__name__)


class RoutedStep:
    """Writes routed micro-batches for one sink configuration.

    Args:
        config: The routed sink's configuration.
        catalog: The sink's catalog.
        metrics: The sink's metrics (each table under its own ``table`` label).
        dead_letters: The sink's dead-letter queue.
        label: What names the sink where no single table does (shared steps, unroutable rows).
    """

    def __init__(
        self,
        config: SinkConfig,
        catalog: Catalog,
        metrics: SinkMetrics,
        dead_letters: DeadLetterQueue,
        label: str,
    ) -> None:
        self._config = config
        self._catalog = catalog
        self._metrics = metrics
        self._dead_letters = dead_letters
        self.label = label
        self._names = DestinationNames(config.route, reserved=(dead_letters.table_name,))
        self._options = TableOptions(config)
        self._tables = RoutedTables(config, catalog, metrics, self._options, (dead_letters.table_name,))
        self._upserts = RoutedUpserts(config, metrics)
        self._writes = RoutedWrites(config.write.memory_budget_bytes, metrics, label)
        self._lock = threading.Lock()
        self._sink_locks: dict[str, threading.Lock] = {}
        self._unsettled: dict[str, SourceWrite] = {}  # sink id -> its planned write not yet written
        self._by_source = RoutedSourcePlanner(config, catalog, metrics, self._options, self._tables)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: its tasks' write to known tables (:mod:`sink.routed_source`)."""
        sink_id = sink_id_of(batch_df, self._config.sink_id)
        with self._lock:
            sink_lock = self._sink_locks.setdefault(sink_id, threading.Lock())
        with sink_lock:
            failed = self._unsettled.pop(sink_id, None)  # its batch failed before reaching the sink
            if failed is not None:
                self._tables.forget_recovery(failed.tables, sink_id)
            planned = self._by_source.plan(batch_df, batch_id, sink_id)
            if planned is not None:
                self._unsettled[sink_id] = planned
            return planned

    def prepare_destinations(self, schemas: Mapping[str, st.StructType]) -> frozenset[str]:
        """The tables of the values the source saw, before a batch; the values planned from now on."""
        if schemas:
            self._by_source.prepare(self._names.tables_of(schemas), schemas)
        return self._by_source.known()

    def write_batch(
        self, batch_df: DataFrame, batch_id: int, sink_id: str, arrow_source: ArrowSource | None = None
    ) -> None:
        """Write one micro-batch to its tables (the steps of this module's docstring).

        When ``arrow_source.written``, the source's tasks wrote some of the batch's rows
        (:mod:`sink.routed_source`); ``batch_df`` holds the rest.
        """
        by_source = arrow_source.written if arrow_source is not None else None
        with self._lock:
            sink_lock = self._sink_locks.setdefault(sink_id, threading.Lock())
        with sink_lock, self._metrics.batch(self.label, sink_id, batch_id, query_id_of(batch_df)):
            self._unsettled.pop(sink_id, None)
            try:
                self._write_batch(batch_df, batch_id, sink_id, arrow_source)
            except BaseException:
                if by_source is not None:
                    self._tables.forget_recovery(by_source.tables, sink_id)
                raise

    def _write_batch(
        self, batch_df: DataFrame, batch_id: int, sink_id: str, arrow_source: ArrowSource | None
    ) -> None:
        by_source = arrow_source.written if arrow_source is not None else None
        if by_source is not None and by_source.remaining_rows == 0:  # the source's tasks wrote every row
            position, found, tables_of = -1, [], {}
        else:
            case_sensitive = self._config.table_schema.case_sensitive
            position = route_column(batch_df.schema, self._config.route, case_sensitive)
            with self._metrics.time_step(self.label, "route"):  # 1. the ONE job finding the destinations
                found = self._destinations(batch_df, position, arrow_source)
                tables_of = self._names.tables_of(d.value for d in found)
        prepared = self._tables.prepare(found, tables_of, batch_df.schema, sink_id, batch_id)  # 2.
        routed = {v: None if v in prepared.refused else n for v, n in tables_of.items()}
        configs = {d.value: self._options.config_for(n) for d in found if d.value and (n := routed[d.value])}
        upserted = {value: config for value, config in configs.items() if config.upsert.enabled}
        changes = self._upserts.split(batch_df, position, upserted)  # upserted tables: last change per key
        try:
            self._write_routed(changes, found, routed, prepared, position, sink_id, batch_id, by_source)
        finally:
            changes.release()
        self._by_source.learn(routed)

    @staticmethod
    def _destinations(
        batch_df: DataFrame, position: int, arrow_source: ArrowSource | None
    ) -> list[DestinationValue]:
        """Counted where the batch's rows are made when it was made in Python, else by Spark."""
        if arrow_source is not None:
            found = resolve_in_tasks(arrow_source.df, arrow_source.function, batch_df.schema, position)
            if found is not None:
                return found
        return resolve(batch_df, position)

    def _write_routed(
        self,
        changes: RoutedChanges,
        found: list[DestinationValue],
        tables_of: dict[str | None, str | None],
        prepared: PreparedTables,
        position: int,
        sink_id: str,
        batch_id: int,
        by_source: SourceWrite | None,
    ) -> None:
        batch_df, targets = changes.rows, prepared.targets
        indexes = {v: t.index for t in targets for v in t.values} | dict.fromkeys(prepared.skipped, SKIPPED)
        unroutable = [d for d in found if tables_of[d.value] is None]
        reasons = {d.value: self._reason(d.value, prepared) for d in unroutable if d.value is not None}
        written = source_targets(by_source, targets, self._options)  # tables the source's tasks alone wrote
        if not targets and not unroutable and not written:
            logger.info("batch %s of sink %s: every table already has it (or it is empty)", batch_id, sink_id)
            return
        self._log_unroutable(unroutable, reasons, sink_id, batch_id)
        projection = None
        if targets or unroutable:
            with self._metrics.time_step(self.label, "normalize"):  # 3. the ONE projection
                tables = [DestinationTable(t.index, t.name, t.table.schema(), t.columns) for t in targets]
                options = self._projection_options(position)
                projection = project(batch_df, tables, indexes, reasons, options)
        try:
            self._write_and_commit(projection, changes, targets, written, sink_id, batch_id, by_source)
        except BaseException:
            self._tables.forget_recovery((t.name for t in targets + written), sink_id)
            raise

    def _log_unroutable(
        self, unroutable: list[DestinationValue], reasons: dict[str, str], sink_id: str, batch_id: int
    ) -> None:
        """One line per reason code, whatever the number of values (garbage makes thousands)."""
        by_code: dict[str, list[tuple[int, str]]] = {}
        for d in unroutable:
            reason = NULL_VALUE_REASON if d.value is None else reasons[d.value]
            by_code.setdefault(reason.split(":", 1)[0], []).append((d.rows, reason))
        for code, found in sorted(by_code.items()):
            logger.warning(
                "batch %s of sink %s: %s rows of %s values go to the dead-letter table %s as %s, e.g. %s",
                batch_id,
                sink_id,
                sum(rows for rows, _ in found),
                len(found),
                self._dead_letters.table_name,
                code,
                found[0][1],
            )

    def _reason(self, value: str, prepared: PreparedTables) -> str:
        """The dead-letter reason of an unroutable value's rows."""
        refused = prepared.refused.get(value)
        return refused or dead_letter_reason(
            BadRecordReason.UNROUTABLE, self._names.describe_unroutable(value)
        )

    def _projection_options(self, position: int) -> ProjectionOptions:
        return ProjectionOptions(
            position,
            self._config.table_schema.case_sensitive,
            self._config.table_schema.evolution is SchemaEvolution.ADD_COLUMNS_AND_WIDEN,
            self._config.dead_letter.on_bad_record,
            self.label,
        )

    def _write_and_commit(
        self,
        projection: RoutedProjection | None,
        changes: RoutedChanges,
        targets: list[RoutedTarget],
        written: list[RoutedTarget],
        sink_id: str,
        batch_id: int,
        by_source: SourceWrite | None,
    ) -> None:
        """Steps 4 to 6; ``projection`` is ``None`` when the source's tasks wrote every row."""
        attempt = uuid.uuid4().hex[:16] if by_source is None else by_source.attempt
        result = WriteResult([], RowCounts(0, 0))
        if projection is not None:
            result = self._writes.write(projection, targets, sink_id, batch_id, attempt, by_source)
            rows = sum(f.record_count for f in result.files)
            dead_letters, counts = self._upserts.dead_letters(changes, projection.dead_letters, result.counts)
            if not self._dead_letters.deliver(
                dead_letters, sink_id, batch_id, rows, counts
            ).skipped_replay:  # 5.
                self._upserts.count_rejected(changes)
            upserted = [t for t in targets if t.config.upsert.enabled]
            # 6. upserted tables: ONE key job, ONE lookup job, a row delta each
            self._upserts.commit(upserted, projection, changes, result.files, sink_id, batch_id, attempt)
        if by_source is not None:
            record_source_files(by_source, self._metrics)
            result = WriteResult(by_source.files + result.files, result.counts)
        appended = [t for t in targets if not t.config.upsert.enabled] + written
        commit_tables(appended, result.files, self._metrics, sink_id, batch_id, attempt)  # 6.
