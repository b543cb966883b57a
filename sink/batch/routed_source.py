"""Step 4 done by the source for a routed batch: its tasks write each known table's rows.

The routed counterpart of :mod:`sink.batch.source_write`. A sink routing by topic knows, from
the batches it wrote, which topic goes to which table. Before a micro-batch's source
runs, it plans a write by the source's tasks for each of those tables that allows one
(it exists, every column optional, partition values the tasks can compute, no upsert, no
shuffle asked by ``write.distribution-mode``),
each table's crashed attempts settled and the write's attempt recorded on it, one
attempt id for every table. The tasks then write the records of a planned topic to its
table as they decode them (:mod:`sink.write.source_task`), and the routed step
(:mod:`sink.batch.routed`) writes the rest of the batch, as the same attempt, and commits
each table's files of both, each with its own ledger.

A topic the sink has not written yet goes the routed step's way, and is planned from
the next batch on, unless the source prepared its table before the batch: a source that
can look at a topic's latest records before they are read (the Kafka job's) hands their
type to :meth:`RoutedSourcePlanner.prepare`, which creates the table from it (or evolves
an existing one for it) and plans the topic from that batch on. Records of a type the
table does not take yet still go the routed step's way, which evolves the table first.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from sink import catalog as catalogs
from sink.batch.key import BatchKey
from sink.batch.source_write import SourceWrite, plan_source_write, source_task_options
from sink.batch.table_batch import RoutedTarget, TableBatch
from sink.config import SinkConfig
from sink.config_route import RouteBy
from sink.destinations.table_options import TableOptions
from sink.errors import SinkError
from sink.metrics import SinkMetrics
from sink.parallel import run_parallel
from sink.spark_session import is_connect

if TYPE_CHECKING:
    from sink.batch.routed_tables import RoutedTables
    from sink.batch.states import TableStates

logger = logging.getLogger(__name__)


class RoutedSourcePlanner:
    """Plans the source's writes of a routed sink's batches (see the module).

    Args:
        config: The routed sink's configuration.
        catalog: The sink's catalog.
        metrics: The sink's metrics.
        options: Each table's configuration.
        tables: Opens each table (within ``route.max-tables``, for one value).
        states: The sink's table states: each table's crashed attempts are settled before
            its first planned write.
    """

    def __init__(
        self,
        config: SinkConfig,
        catalog: Catalog,
        metrics: SinkMetrics,
        options: TableOptions,
        tables: RoutedTables,
        states: TableStates,
    ) -> None:
        self._config = config
        self._catalog = catalog
        self._metrics = metrics
        self._options = options
        self._tables = tables
        self._states = states
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
        """Load or create (and evolve) the table of each topic not known yet, for rows of its schema.

        ``tables_of`` names each topic's table (``None``: unroutable, left alone). A table
        that cannot be made from what was seen (a ``partition-by`` column missing, say) is
        left to the routed step, which fails or succeeds with the batch's own rows.
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
        if self._options.config_for(name).upsert.enabled:
            return False  # never planned: the rows are changes
        try:
            self._tables.prepare_table(name, topic, schema)
        except SinkError as e:  # the routed step sends the rows where they belong, or fails the batch
            logger.warning("table %s is left to the batch's own rows: %s", name, e)
            return False
        return True

    def plan(self, batch_df: DataFrame, batch_id: int, sink_id: str) -> SourceWrite | None:
        """The source's write of the batch to the known tables; ``None`` when none allows one."""
        if self._config.route.by is not RouteBy.TOPIC or is_connect(batch_df.sparkSession):
            return None  # a field's value is known after decoding; no local properties under Connect
        with self._lock:
            grouped: dict[str, list[str]] = {}
            for value, name in self._known.items():
                grouped.setdefault(name, []).append(value)
        if not grouped:
            return None
        key = BatchKey.new(sink_id, batch_id)
        planned = run_parallel([functools.partial(self._plan_table, name, key) for name in sorted(grouped)])
        ready = [p for p in planned if p is not None]
        if not ready:
            return None
        routes = {value: index for index, (batch, _) in enumerate(ready) for value in grouped[batch.name]}
        return plan_source_write(ready, self._config.write.memory_budget_bytes, routes)

    def _plan_table(self, name: str, key: BatchKey) -> tuple[TableBatch, dict[str, Any]] | None:
        config = self._options.config_for(name)
        if config.upsert.enabled:
            return None  # the rows are changes
        table = catalogs.load_table(self._catalog, name)
        if table is None:
            return None  # dropped since
        task_options = source_task_options(table, config, routed=True)
        if task_options is None:
            return None  # a null could be bad, a spec the tasks cannot compute, a shuffle: the routed step's
        batch = TableBatch(name, config, table, key, self._states.get(name, config, table, key.sink_id))
        if batch.has_batch():
            return None  # a replay: the routed step skips the table
        return batch, task_options


def source_targets(
    by_source: SourceWrite | None,
    targets: list[RoutedTarget],
    options: TableOptions,
    key: BatchKey,
    states: TableStates,
) -> list[RoutedTarget]:
    """The planned tables the routed step's own write leaves out, for their commits.

    A target for each table the source's tasks wrote files to; on the others, which
    got no row of the batch at all, the attempt is ended.
    """
    if by_source is None:
        return []
    covered = {t.name for t in targets}
    written, idle = [], []
    for name, planned in by_source.tables.items():
        if name in covered:
            continue
        if by_source.files_of(name):
            config = options.config_for(name)
            batch = TableBatch(
                name, config, planned.table, key, states.get(name, config, planned.table, key.sink_id)
            )
            batch.adopt(planned.spec, planned.attempts)
            written.append(RoutedTarget(batch, (), ()))
        else:
            idle.append(name)
    run_parallel([functools.partial(by_source.end, [name]) for name in idle])
    return written


def record_source_files(by_source: SourceWrite, metrics: SinkMetrics) -> None:
    """The files' metrics of each table, as the routed write records its own."""
    for (name, _), planned in zip(by_source.tables.items(), by_source.plan.tables, strict=True):
        files = by_source.files_of(name)
        if files:
            metrics.record_files(name, files, planned.spec.target_file_size_bytes)
