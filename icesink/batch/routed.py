"""The routed plan (``route.by`` = ``topic`` | ``field``): a :class:`~icesink.sink.BatchPlan` of many tables.

The number of its Spark jobs does not grow with its tables: ONE job finds the batch's
destination values and their non-null columns (:mod:`icesink.destinations.resolve`), ONE
projection normalizes every table's rows (:mod:`icesink.destinations.projection`), ONE job
writes them and ONE collects the upserted tables' keys (:mod:`icesink.batch.routed_write`) for
ONE lookup job; none after the source's when its tasks wrote every row. Its catalog and
storage calls do grow, a few per table on a small thread pool. Each table commits on its own,
with its own ledger: a crash between two tables' commits replays the batch, and the tables that
have it are skipped, their rows left out of the write.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.batch.changes import ChangeBatch
from icesink.batch.commits import Written, WrittenBatch
from icesink.batch.key import BatchKey
from icesink.batch.routed_write import RoutedWrites, routed_changed_keys
from icesink.batch.source_write import (
    ArrowSource,
    SourcePlanner,
    SourceWrite,
    record_source_files,
    source_targets,
)
from icesink.batch.table_batch import RoutedTarget
from icesink.batch.tables import PreparedTables, Tables
from icesink.destinations.destination_table import DestinationTable
from icesink.destinations.naming import DestinationNames
from icesink.destinations.projection import SKIPPED, ProjectionOptions, log_unroutable, project
from icesink.destinations.resolve import (
    DestinationValue,
    destination_value,
    quoted,
    resolve_batch,
    route_column,
)
from icesink.errors import ConfigError
from icesink.log_context import batch_logger
from icesink.parallel import run_parallel
from icesink.spark_session import query_id_of, sink_id_of
from icesink.write.messages import RowCounts, WriteResult, files_of

if TYPE_CHECKING:
    from icesink.batch.finish import Finish

logger = batch_logger(__name__)


class RoutedStep:
    """Writes a routed sink's micro-batches; ``label`` names the sink where no single table does
    (shared steps, unroutable rows)."""

    def __init__(self, finish: Finish, label: str, tables: Tables) -> None:
        parts = finish.parts
        self._config = config = parts.config
        self._states = parts.states
        self._metrics = metrics = parts.metrics
        self._finish = finish
        self._dead_letter_table = dead_letter_table = finish.dead_letters.table_name
        self.label = label
        self._names = DestinationNames(config.route, reserved=(dead_letter_table,))
        self._options = options = finish.options
        self._tables = tables
        self._upserts = finish.changes
        self._writes = RoutedWrites(config.write.memory_budget_bytes, metrics, label)
        self._lock = threading.Lock()
        self._sink_locks: dict[str, threading.Lock] = {}
        self._unsettled: dict[str, SourceWrite] = {}  # sink id -> its planned write not yet written
        self._by_source = SourcePlanner(parts, options.config_for, self._tables)

    def _sink_lock(self, sink_id: str) -> threading.Lock:
        """Held while a batch of the sink id is planned or prepared: its batches run one at a time."""
        with self._lock:
            return self._sink_locks.setdefault(sink_id, threading.Lock())

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        sink_id = sink_id_of(batch_df, self._config.sink_id)
        with self._sink_lock(sink_id):
            failed = self._unsettled.pop(sink_id, None)  # its batch failed before reaching the sink
            if failed is not None:
                self._states.forget(failed.tables, sink_id)
            planned = self._by_source.plan(batch_df, batch_id, sink_id)
            if planned is not None:
                self._unsettled[sink_id] = planned
            return planned

    def prepare_schemas(self, schemas: Mapping[str, st.StructType]) -> dict[str, Table]:
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
            functools.partial(self._tables.prepare_table, n, schemas[v], v)
            for v, n in tables_of.items()
            if v and n
        ]
        tables = dict(zip(schemas, run_parallel(prepare), strict=True))
        self._by_source.learn(tables_of)  # their rows may be written by the source's tasks from now on
        return tables

    def prepare_destinations(self, schemas: Mapping[str, st.StructType]) -> frozenset[str]:
        if schemas:
            self._by_source.prepare(self._names.tables_of(schemas), schemas)
        return self._by_source.known()

    @contextmanager
    def prepare(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None
    ) -> Iterator[RoutedBatch | None]:
        """Inside: the batch's destinations and tables, the sink id's lock held; ``None``: none to write."""
        by_source = arrow_source.written if arrow_source is not None else None
        sink_id = key.sink_id
        with (
            self._sink_lock(sink_id),
            self._metrics.batch(self.label, sink_id, key.batch_id, query_id_of(batch_df)),
        ):
            self._unsettled.pop(sink_id, None)
            batch = None
            try:
                batch = self._prepare(batch_df, key, arrow_source)
                yield None if batch.empty() else batch
            except BaseException:
                self._states.forget(by_source.tables if by_source is not None else (), sink_id)
                if batch is not None:  # the failed attempt's files are settled by the replay
                    self._states.forget((t.name for t in batch.tables.targets + batch.written), sink_id)
                raise
            self._by_source.learn(batch.routed)

    def _prepare(self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None) -> RoutedBatch:
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
        written = source_targets(by_source, prepared.targets)  # the tables the source's tasks alone wrote to
        batch = RoutedBatch(key, by_source, found, routed, prepared, position, written)
        if batch.empty():
            logger.info(
                "batch %s of sink %s: every table already has it (or it is empty)", key.batch_id, key.sink_id
            )
            if not found and by_source is None:  # an empty batch: the source has caught up
                self._finish.flush(lambda state: state.sink_id == key.sink_id, last_batch_id=key.batch_id)
        return batch

    def changes(self, batch_df: DataFrame, prepared: RoutedBatch) -> ChangeBatch:
        routed = prepared.routed
        configs = {
            d.value: self._options.config_for(n) for d in prepared.found if d.value and (n := routed[d.value])
        }
        upserted = {value: config for value, config in configs.items() if config.upsert.enabled}
        if not upserted:
            return ChangeBatch(batch_df)
        dest = destination_value(F.col(quoted(batch_df.columns[prepared.position])))
        return self._upserts.split(batch_df, dest, upserted)

    def write(self, prepared: RoutedBatch, changes: ChangeBatch) -> WrittenBatch:
        key, by_source, targets = prepared.key, prepared.by_source, prepared.tables.targets
        position = prepared.position
        skipped = dict.fromkeys(prepared.tables.skipped, SKIPPED)
        indexes = {v: t.index for t in targets for v in t.values} | skipped
        unroutable = prepared.unroutable
        refused = prepared.tables.refused
        reasons = {d.value: self._names.reason(d.value, refused) for d in unroutable if d.value is not None}
        log_unroutable(unroutable, reasons, self._dead_letter_table, key.sink_id, key.batch_id)
        projection = None
        result = WriteResult([], RowCounts(0, 0))
        if targets or unroutable:
            with self._metrics.time_step(self.label, "normalize"):  # 3. the ONE projection
                tables = [DestinationTable(t.index, t.name, t.table.schema(), t.columns) for t in targets]
                options = ProjectionOptions.of(self._config, position, self.label)
                projection = project(changes.rows, tables, indexes, reasons, options)
            result = self._writes.write(projection, targets, key, by_source)  # 4.
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

        written = [Written(t.batch, files_of(files, t.name)) for t in targets + prepared.written]
        return WrittenBatch(written, counts, bad_rows, changed_keys)


@dataclass(frozen=True)
class RoutedBatch:
    """A routed batch's destinations and tables, as :meth:`RoutedStep.prepare` found them: each value's
    table (``routed``; ``None``: unroutable or refused), the route column's ``position`` (-1: the
    source wrote every row), and the tables only the source's tasks wrote to (``written``)."""

    key: BatchKey
    by_source: SourceWrite | None
    found: list[DestinationValue]
    routed: dict[str | None, str | None]
    tables: PreparedTables
    position: int
    written: list[RoutedTarget]

    def empty(self) -> bool:
        """Whether nothing is left to write or commit: every table has the batch, or it has no rows."""
        return not self.tables.targets and not self.written and not self.unroutable

    @property
    def unroutable(self) -> list[DestinationValue]:
        return [d for d in self.found if self.routed[d.value] is None]
