"""Rows a source makes in Python, written with no round trip through the JVM.

A source that makes its rows in Python (the Kafka job's decoding tasks) describes its batch with
an :class:`ArrowSource`, so that the write tasks may make the rows themselves; or its own tasks
write them as they make them (:mod:`icesink.write.source_task`), to one table or to each table a
routed sink knows. Before the source runs, :class:`SourcePlanner` picks the tables that allow it
(:func:`source_task_options`, and no upserts) and records one attempt on each, so that a crash
leaves files a restart can find; each task writes the rows it can give their table's exact type
and yields the rest, which goes through the usual steps as the same attempt; each table's files
of both are committed in one snapshot. A topic a routing sink has not written yet goes the
routed step's way, unless the source prepared its table (:meth:`SourcePlanner.prepare`).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pyiceberg.table import Table
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import catalog as catalogs
from icesink import failpoints
from icesink.batch.key import BatchKey
from icesink.batch.table_batch import RoutedTarget, TableBatch
from icesink.config import DistributionMode, SinkConfig
from icesink.config_route import RouteBy
from icesink.errors import SinkError
from icesink.metrics import SinkMetrics
from icesink.parallel import run_parallel
from icesink.route.routed import resolve_mode
from icesink.spark_session import is_connect, local_property, query_id_of
from icesink.type_mapping import all_optional, row_schema_of
from icesink.write.keys import arrow_key_functions
from icesink.write.messages import DataFileMessage, RowCounts, files_of
from icesink.write.source_task import TASK_PROPERTY, SourceTable, SourceWritePlan
from icesink.write.task import ArrowFunction

if TYPE_CHECKING:
    from icesink.batch.states import SinkParts
    from icesink.batch.tables import Tables

logger = logging.getLogger(__name__)

SOURCE_FILE_SUFFIX = "-s"  # after the attempt's file prefix: its write tasks' names stay apart


@dataclass(frozen=True)
class ArrowSource:
    """How a batch was made in Python: ``df.mapInArrow(function, <the batch's schema>)``.

    Handing the rows from that function to the JVM and back to the write task costs two
    conversions of every row. When the batch needs nothing from Spark on the way (its
    schema is the table's, no row can be bad but in ``in_range_columns``, no partition-value
    column or shuffle is added: :func:`~icesink.batch.one_table.fusable`), the write tasks run
    ``function`` on ``df``'s rows themselves.

    Attributes:
        df: The DataFrame ``function`` maps.
        function: The ``mapInArrow`` function that made the batch.
        rows: The batch's rows, as its maker counted them: the write must account for each.
        in_range_columns: Date and timestamp columns whose values the maker keeps within
            the range the sink writes (0001-01-01 to 9999-12-31), so Spark need not check them.
        written: The rows the source's own tasks wrote (:meth:`IcebergSink.source_write
            <icesink.sink.IcebergSink.source_write>`); the batch is the rest of the rows.
        row_bytes: The width of the rows ``function`` makes, in Arrow bytes per row, when ``df``'s
            rows say nothing of it (0: the write tasks measure ``df``'s rows, which Spark hands them).
    """

    df: DataFrame
    function: ArrowFunction
    rows: int
    in_range_columns: frozenset[str] = frozenset()
    written: SourceWrite | None = None
    row_bytes: int = 0


@dataclass
class SourceWrite:
    """One batch's write by the source's tasks: their plan, its one attempt on every table (``tables``:
    each table's batch, its attempt on record), and after :meth:`record` the files they wrote and the
    rows they left (the batch's DataFrame)."""

    plan: SourceWritePlan
    batch_id: int
    attempt: str
    tables: dict[str, TableBatch]
    files: list[DataFileMessage] = field(default_factory=list)
    remaining_rows: int = 0

    @property
    def rows(self) -> int:
        return sum(f.record_count for f in self.files)

    def joined(
        self, files: list[DataFileMessage], counts: RowCounts
    ) -> tuple[list[DataFileMessage], RowCounts]:
        """The sink's own write of the rest of the batch (its files, the rows it received) with this one."""
        return self.files + files, RowCounts(counts.input_rows + self.rows, counts.bad_rows)

    def files_of(self, table: str) -> list[DataFileMessage]:
        return files_of(self.files, table)

    @contextmanager
    def in_source_tasks(self, spark: SparkSession) -> Iterator[None]:
        """Hand the plan to every task of the jobs run inside, from this thread.

        Keep it for as long as the batch's source may be read again (a cached block
        recomputed): a task makes the same choice with the same plan, so no row is
        written once by the source and again by the sink.
        """
        with local_property(spark, TASK_PROPERTY, self.plan.encode()):
            yield

    def record(self, messages: Iterable[str], remaining_rows: int) -> None:
        self.files = [DataFileMessage.from_json(text) for text in messages]
        self.remaining_rows = remaining_rows

    def end(self, names: Iterable[str] | None = None) -> None:
        """Nothing of the attempt is left on these tables (default: all): forget it there."""
        for name in self.tables if names is None else names:
            self.tables[name].end()


def plan_source_write(
    batches: Sequence[tuple[TableBatch, dict[str, Any]]],
    memory_budget_bytes: int,
    routes: Mapping[str, int] | None = None,
) -> SourceWrite:
    """The source's write of a batch to the tables of ``batches`` (each with its tasks' options),
    every attempt on record; ``routes``: a routed source's value -> index in ``batches``. Each
    table's state must be recovered first: a recovery after this would delete the tasks' files."""
    tables, planned = [], {}
    for batch, task_options in batches:
        spec = batch.begin(task_options)
        tables.append(
            SourceTable(
                replace(spec, file_prefix=spec.file_prefix + SOURCE_FILE_SUFFIX), row_schema_of(batch.table)
            )
        )
        planned[batch.name] = batch
    key = batches[0][0].key
    plan = SourceWritePlan(tuple(tables), memory_budget_bytes, routes, failpoints.for_tasks())
    return SourceWrite(plan, key.batch_id, key.attempt, planned)


def source_task_options(table: Table, config: SinkConfig, routed: bool = False) -> dict[str, Any] | None:
    """The write tasks' options for ``table`` when a source's tasks can write it: every column optional
    (a null is never a bad row), no shuffle, partition values the tasks can compute; else ``None``."""
    spec, schema = table.spec(), table.schema()
    if not all_optional(row_schema_of(table)):
        return None
    if spec.fields:  # an unpartitioned table's rows are never shuffled, whatever the mode
        mode = (
            config.write.distribution_mode if routed else resolve_mode(config.write.distribution_mode, spec)
        )
        if mode in (DistributionMode.BUCKET, DistributionMode.HASH):  # a routed sink's unset mode: none
            return None
        if arrow_key_functions(spec, schema) is None:
            return None
    return {"num_data_columns": len(schema.fields), "partition_values_in_task": bool(spec.fields) or routed}


class SourcePlanner:
    """Plans the source's writes of a sink's batches, to its one table or (``tables``) its routed ones."""

    def __init__(
        self, parts: SinkParts, config_for: Callable[[str], SinkConfig], tables: Tables | None = None
    ) -> None:
        self._config = parts.config
        self._catalog = parts.catalog
        self._config_for = config_for
        self._tables = tables
        self._states = parts.states
        self._lock = threading.Lock()
        self._known: dict[str, str] = {}  # topic -> table, of the tables written so far

    def learn(self, tables_of: Mapping[str | None, str | None]) -> None:
        """The destinations of a batch the routed step wrote: topic -> table."""
        with self._lock:
            self._known.update((v, n) for v, n in tables_of.items() if v is not None and n is not None)

    def known(self) -> frozenset[str]:
        """The topics whose table the tasks may write: written before, or prepared."""
        with self._lock:
            return frozenset(self._known)

    def prepare(
        self, tables_of: Mapping[str | None, str | None], schemas: Mapping[str, st.StructType]
    ) -> None:
        """Load or create (and evolve) the table of each topic not known yet for rows of its schema (as
        the source saw its latest records), and plan the topic from the coming batch on.

        ``tables_of`` names each topic's table (``None``: unroutable, left alone). A table that
        cannot be made from what was seen (a ``partition-by`` column missing, say) is left to the
        routed step, which fails or succeeds with the batch's own rows.
        """
        known = self.known()
        wanted = {
            t: n
            for t, n in tables_of.items()
            if t is not None and n is not None and t in schemas and t not in known
        }
        if self._config.route.by is not RouteBy.TOPIC or not wanted:
            return
        prepare = [functools.partial(self._prepare_table, n, t, schemas[t]) for t, n in wanted.items()]
        results = run_parallel(prepare)
        self.learn({t: n for (t, n), ready in zip(wanted.items(), results, strict=True) if ready})

    def _prepare_table(self, name: str, topic: str, schema: st.StructType) -> bool:
        if self._config_for(name).upsert.enabled or self._tables is None:
            return False  # never planned: the rows are changes
        try:
            self._tables.prepare_table(name, schema, topic)
        except SinkError as e:  # the routed step sends the rows where they belong, or fails the batch
            logger.warning("table %s is left to the batch's own rows: %s", name, e)
            return False
        return True

    def plan(self, batch_df: DataFrame, batch_id: int, sink_id: str) -> SourceWrite | None:
        """The source's write of the batch to the sink's table or the known ones; ``None`` when none
        allows one."""
        routed = self._config.route.enabled
        if (routed and self._config.route.by is not RouteBy.TOPIC) or is_connect(batch_df.sparkSession):
            return None  # a field's value is known after decoding; no local properties under Connect
        with self._lock:
            grouped: dict[str, list[str]] = {} if routed else {self._config.table: []}
            for value, name in self._known.items():
                grouped.setdefault(name, []).append(value)
        key = BatchKey.new(sink_id, batch_id)
        plan_table = functools.partial(self._plan_table, key=key, query_id=query_id_of(batch_df))
        planned = run_parallel([functools.partial(plan_table, name) for name in sorted(grouped)])
        ready = [p for p in planned if p is not None]
        if not ready:
            return None
        routes = {value: index for index, (batch, _) in enumerate(ready) for value in grouped[batch.name]}
        return plan_source_write(ready, self._config.write.memory_budget_bytes, routes if routed else None)

    def _plan_table(
        self, name: str, key: BatchKey, query_id: str | None
    ) -> tuple[TableBatch, dict[str, Any]] | None:
        config = self._config_for(name)
        if config.upsert.enabled:
            return None  # the rows are changes
        table = catalogs.load_table(self._catalog, name)
        if table is None:
            return None  # a new table's types come from the batch; or dropped since
        task_options = source_task_options(table, config, routed=self._config.route.enabled)
        if task_options is None:
            return None  # a null could be bad, a spec the tasks cannot compute, a shuffle
        batch = TableBatch.of(self._states, name, config, table, key, query_id)
        if batch.has_batch():
            return None  # a replay: the sink skips the table
        return batch, task_options


def source_targets(by_source: SourceWrite | None, targets: list[RoutedTarget]) -> list[RoutedTarget]:
    """A target for each planned table only the source's tasks wrote files to, for its commit; on the
    tables that got no row of the batch at all, the attempt is ended."""
    if by_source is None:
        return []
    covered = {t.name for t in targets}
    written: list[TableBatch] = []
    idle: list[TableBatch] = []
    for name, planned in by_source.tables.items():
        if name not in covered:
            (written if by_source.files_of(name) else idle).append(planned)
    run_parallel([planned.end for planned in idle])
    return [RoutedTarget(planned, (), ()) for planned in written]


def record_source_files(by_source: SourceWrite, metrics: SinkMetrics) -> None:
    """The files' metrics of each table, as the routed write records its own."""
    for (name, _), planned in zip(by_source.tables.items(), by_source.plan.tables, strict=True):
        files = by_source.files_of(name)
        if files:
            metrics.record_files(name, files, planned.spec.target_file_size_bytes)
