"""The one-table plan: the :class:`~icesink.sink.BatchPlan` of one destination.

Its table is opened as a routed sink opens each of its tables (:mod:`icesink.batch.tables`);
its Spark job shapes are its own: the bucket shuffle (:mod:`icesink.route.router`), and a
batch made in Python, or of Parquet files (:mod:`icesink.batch.parquet_source`), written by
the tasks that make or read its rows when nothing needs Spark on the way (:func:`fusable`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from icesink import failpoints
from icesink.batch.changes import ChangeBatch, changed_keys
from icesink.batch.collected import collect_changes
from icesink.batch.commits import Written, WrittenBatch
from icesink.batch.parquet_source import may_read_parquet, parquet_source
from icesink.batch.source_write import ArrowSource, SourcePlanner, SourceWrite
from icesink.batch.table_batch import TableBatch
from icesink.batch.write_job import BatchWriter
from icesink.config import DistributionMode
from icesink.metrics_server import is_exported
from icesink.normalize import (
    NormalizedBatch,
    NormalizeOptions,
    check_normalizes,
    checked_elsewhere,
    is_table_schema,
    normalize,
)
from icesink.progress import watch_query
from icesink.route.routed import RoutedBatch
from icesink.spark_session import query_id_of, sink_id_of
from icesink.upsert.checks import UpsertChecks

if TYPE_CHECKING:
    from icesink.batch.finish import Finish
    from icesink.batch.key import BatchKey
    from icesink.batch.tables import Tables

OneTableBatch = tuple[TableBatch, "ArrowSource | None"]  # the table batch, and how its rows may be made


class OneTablePlan:
    """Writes a one-table sink's micro-batches."""

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
        return self._sources.plan(batch_df, batch_id, sink_id_of(batch_df, self._config.sink_id))

    @contextmanager
    def prepare(
        self, batch_df: DataFrame, key: BatchKey, arrow_source: ArrowSource | None
    ) -> Iterator[OneTableBatch | None]:
        """Inside: the table batch, and how the write's tasks may make its rows (never for upserts)."""
        batch = self._table_batch(batch_df, key)
        snapshot_id = batch.table.metadata.current_snapshot_id
        with self._metrics.batch(self.label, key.sink_id, key.batch_id, batch.state.query_id, snapshot_id):
            if is_exported(self._metrics):
                watch_query(batch_df, self._metrics)  # progress metrics, on the query's own session
            with batch.state.lock:
                replayed = batch.replayed(self._metrics)
                yield None if replayed else (batch, None if self.upsert.enabled else arrow_source)

    def prepare_schema(self, schema: st.StructType) -> Table:
        table = self._tables.prepare_table(self.label, schema)
        check_normalizes(self.upsert.stored_schema(schema), table.schema(), self.normalize_options)
        return table

    def _table_batch(self, batch_df: DataFrame, key: BatchKey) -> TableBatch:
        table, _ = self._tables.open(self.label, self._config, self.upsert.stored_schema(batch_df.schema))
        assert table is not None  # only a routed template's tables are counted
        return self._tables.batch_of(self.label, self._config, table, key, query_id_of(batch_df))

    def changes(self, batch_df: DataFrame, prepared: OneTableBatch) -> ChangeBatch:
        batch, _ = prepared
        in_driver = None
        if self.upsert.enabled and self._writer.router(batch).writes_in_driver():
            in_driver = functools.partial(
                collect_changes, batch_df, self._config, batch.table, self.normalize_options
            )
        return self._changes.split_one(batch_df, self._config, in_driver)

    def write(self, prepared: OneTableBatch, changes: ChangeBatch) -> WrittenBatch:
        (batch, arrow_source), batch_df = prepared, changes.rows
        name = batch.name
        failpoints.hit("schema")  # 4. schema
        with self._metrics.time_step(name, "schema"):
            table = batch.evolve(batch_df.schema, self._metrics)
        failpoints.hit("normalize")  # 5. normalize
        collected = changes.collected.rows if changes.collected is not None else None
        with self._metrics.time_step(name, "normalize"):
            if collected is None:
                normalized = normalize(batch_df, table.schema(), self.normalize_options)
            else:
                normalized = checked_elsewhere(batch_df)
        failpoints.hit("route")  # 6. distribute
        with self._metrics.time_step(name, "route"):
            routed = self._writer.distribute(batch, normalized, collected)
        parquet = None
        if arrow_source is None and may_read_parquet(routed, self.upsert.enabled):
            parquet = parquet_source(batch_df, table, one_task=routed.single_task)
            if parquet is not None:
                arrow_source = ArrowSource(
                    parquet.df,
                    parquet.function,
                    parquet.rows,
                    in_range_columns=parquet.in_range_columns,
                    row_bytes=parquet.row_bytes,
                )
        # 7. write (timed inside: the attempt record is written first)
        fusing = arrow_source is not None and fusable(
            batch_df, table, normalized, routed, arrow_source, as_routed=parquet is not None
        )
        if fusing and parquet is not None:
            parquet.count_in_spark()
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


def fusable(
    batch_df: DataFrame,
    table: Table,
    normalized: NormalizedBatch,
    routed: RoutedBatch,
    source: ArrowSource,
    as_routed: bool = False,
) -> bool:
    """Whether the batch can be made inside the write tasks (see :class:`ArrowSource`).

    ``as_routed``: ``source`` makes the rows in as many tasks as the route step chose (one when it
    coalesced the batch), not in its own."""
    # A batch coalesced into one task, no column added, moved no row: the source's tasks can still
    # make it: in one task when they follow the route step, in any mode; in their own in ``none``,
    # each writing its own files, as without the coalesce.
    in_task = routed.partition_values_in_task and not routed.source_partition_column
    coalesced = routed.single_task and in_task and (as_routed or routed.mode is DistributionMode.NONE)
    if routed.in_driver or (routed.df is not normalized.rows and not coalesced):
        return False  # the rows must go through Spark: shuffled or collected
    checks = normalized.range_checks
    if checks is None or not checks <= source.in_range_columns:
        return False  # Spark must find the bad rows
    return is_table_schema(batch_df.schema, table.schema())
