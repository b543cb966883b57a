"""The one-table plan: a batch's rows to the sink's table, steps 1 to 7 of :mod:`icesink.sink`.

A plan with one destination (:class:`~icesink.sink.BatchPlan`): the table is opened as a routed
sink opens each of its tables (:mod:`icesink.batch.tables`: loaded or created, checked, its table
batch made), the batch is skipped when the table has it, and the rows are
evolved for, normalized, shuffled by bucket (:mod:`icesink.route.router`) and written in one job
(:mod:`icesink.batch.write_job`), by the source's tasks too when they can make them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from icesink import failpoints
from icesink.batch.arrow_source import ArrowSource, fusable
from icesink.batch.changes import ChangeBatch, changed_keys
from icesink.batch.commits import Written, WrittenBatch
from icesink.batch.source_write import SourcePlanner, SourceWrite
from icesink.batch.table_batch import TableBatch
from icesink.batch.write_job import BatchWriter
from icesink.metrics_server import is_exported
from icesink.normalize import NormalizeOptions, check_normalizes, normalize
from icesink.progress import watch_query
from icesink.spark_session import query_id_of, sink_id_of
from icesink.upsert.checks import UpsertChecks

if TYPE_CHECKING:
    from icesink.batch.finish import Finish
    from icesink.batch.key import BatchKey
    from icesink.batch.tables import Tables

OneTableBatch = tuple[TableBatch, "ArrowSource | None"]  # the table batch, and how its rows may be made


class OneTablePlan:
    """Writes a one-table sink's micro-batches (see the module).

    Args:
        finish: The sink's commits: its parts, dead letters and upsert split.
        tables: Opens the sink's tables (the same as a routed sink's).
    """

    def __init__(self, finish: Finish, tables: Tables) -> None:
        self._config = config = finish.parts.config
        self._metrics = metrics = finish.parts.metrics
        self._tables = tables
        self._changes = finish.changes
        self.label = config.table
        self.upsert = UpsertChecks(config)  # write.mode=upsert: the table's keys; append: no keys
        self.normalize_options = NormalizeOptions.from_config(config, finish.dead_letters.table_name)
        self._writer = BatchWriter(metrics)
        self._sources = SourcePlanner(finish.parts, finish.config_for)

    def source_write(self, batch_df: DataFrame, batch_id: int) -> SourceWrite | None:
        """Before ``batch_df``'s source runs: its tasks' write to the table (:mod:`.source_write`)."""
        return self._sources.plan(batch_df, batch_id, sink_id_of(batch_df, self._config.sink_id))

    @contextmanager
    def prepare(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None
    ) -> Iterator[OneTableBatch | None]:
        """1. the table, loaded or created, recovered; 2. the table has the batch: ``None``.

        ``arrow_source``: how the write's tasks may make the rows (never for upserts).
        """
        batch = self._table_batch(batch_df, key)
        snapshot_id = batch.table.metadata.current_snapshot_id
        with self._metrics.batch(self.label, key.sink_id, key.batch_id, batch.state.query_id, snapshot_id):
            if is_exported(self._metrics):
                watch_query(batch_df, self._metrics)  # progress metrics, on the query's own session
            with batch.state.lock:
                replayed = batch.replayed(self._metrics)
                yield None if replayed else (batch, None if self.upsert.enabled else arrow_source)

    def prepare_schema(self, schema: st.StructType) -> Table:
        """Before the stream starts: the table, created or evolved for rows of ``schema``."""
        table = self._tables.prepare_table(self.label, schema)
        check_normalizes(self.upsert.stored_schema(schema), table.schema(), self.normalize_options)
        return table

    def _table_batch(self, batch_df: DataFrame, key: BatchKey) -> TableBatch:
        """The sink's table batch of ``key``: the table loaded (created on first use) and checked,
        its state recovered from what a crashed run left on first use in this process."""
        table, _ = self._tables.open(self.label, self._config, self.upsert.stored_schema(batch_df.schema))
        assert table is not None  # only a routed template's tables are counted
        return self._tables.batch_of(self.label, self._config, table, key, query_id_of(batch_df))

    def changes(self, batch_df: DataFrame, prepared: OneTableBatch) -> ChangeBatch:
        """3. upsert mode: the last change per key."""
        return self._changes.split_one(batch_df, self._config)

    def write(self, prepared: OneTableBatch, changes: ChangeBatch) -> WrittenBatch:
        """Steps 4 to 7 of the batch's rows (append mode: all of them)."""
        (batch, arrow_source), batch_df = prepared, changes.rows
        name = batch.name
        failpoints.hit("schema")  # 4. schema: new columns and wider types added to the table first
        with self._metrics.time_step(name, "schema"):
            table = batch.evolve(batch_df.schema, self._metrics)
        failpoints.hit("normalize")  # 5. normalize: the rows aligned to the table, bad ones flagged
        with self._metrics.time_step(name, "normalize"):
            normalized = normalize(batch_df, table.schema(), self.normalize_options)
        failpoints.hit("route")  # 6. distribute: the rows shuffled to their write tasks
        with self._metrics.time_step(name, "route"):
            routed = self._writer.distribute(batch, normalized)
        # 7. write (timed inside: the attempt record is written first)
        fusing = arrow_source is not None and fusable(batch_df, table, normalized, routed, arrow_source)
        by_source = arrow_source.written if arrow_source is not None else None
        files, counts = self._writer.write(
            batch, normalized, routed, arrow_source if fusing else None, by_source
        )
        keys, flagged = self._config.upsert.key_columns, counts.bad_rows > 0
        return WrittenBatch(
            [Written(batch, files)],
            counts,
            lambda: normalized.dead_letters,
            lambda: [changed_keys(table, keys, changes, normalized, flagged, files)],
        )
