"""A routed batch's Spark jobs on its one projection: ONE writes every table's files, ONE collects
the keys each upserted table's batch changes.

Routed writes are not shuffled unless ``write.distribution-mode`` asks (:mod:`icesink.route.routed_shuffle`):
each task splits its rows by table and computes their partition values itself
(:mod:`icesink.write.routed_task`; :func:`~icesink.batch.tables.check_keys_in_task`). The keys are of
each table's types: the written rows' from the projection (bad rows left out: their key's current
row stays), the deletes' cast (a key of no table type matches no row).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from icesink.batch.write_job import write_failures
from icesink.destinations.projection import RoutedProjection
from icesink.destinations.resolve import destination_value, quoted
from icesink.metrics import SinkMetrics
from icesink.parallel import run_parallel
from icesink.route.routed_shuffle import routed_mode, shuffle_routed
from icesink.write.messages import WriteResult, files_of
from icesink.write.routed_task import DestinationSpec, RoutedWriteSpec, run_routed_write

if TYPE_CHECKING:
    from icesink.batch.key import BatchKey
    from icesink.batch.source_write import SourceWrite
    from icesink.batch.table_batch import RoutedTarget


IN_TASK = {"partition_values_in_task": True}  # a routed write's tasks compute partition values
_INDEX = "__icesink_key_index"


class RoutedWrites:
    """A sink's routed writes. It remembers, per sink id, how wide the rows of its last write came, so
    that the next write job can run without Spark's byte check on every row
    (:mod:`icesink.write.arrow_input`); ``memory_budget_bytes`` is a task's, for all its tables."""

    def __init__(self, memory_budget_bytes: int, metrics: SinkMetrics, label: str) -> None:
        self._budget = memory_budget_bytes
        self._metrics = metrics
        self._label = label
        self._row_bytes: dict[str, int] = {}  # sink id -> the widest rows of its last write

    def write(
        self,
        projection: RoutedProjection,
        targets: list[RoutedTarget],
        key: BatchKey,
        by_source: SourceWrite | None = None,
    ) -> WriteResult:
        """Record each table's attempt (unless ``by_source`` did), then write every table's files."""
        planned = by_source.tables if by_source is not None else {}
        destinations: list[DestinationSpec] = []
        records: list[Callable[[], None]] = []
        for target in targets:
            batch = target.batch
            spec = batch.write_spec({"num_data_columns": len(batch.table.schema().fields), **IN_TASK})
            records.append(batch.start(spec, planned))
            destinations.append(DestinationSpec(target.index, spec, projection.slots[target.index]))
        run_parallel(records)  # every attempt is on record before any file is written
        mode = routed_mode(t.config.write.distribution_mode for t in targets)
        routed = RoutedWriteSpec(tuple(destinations), self._budget)
        rows, routed = shuffle_routed(projection.rows, routed, mode, log=(key.batch_id, key.sink_id))
        failures = write_failures(projection.rows, self._label, key.batch_id, what="routed write job")
        with self._metrics.time_step(self._label, "write"), failures:
            result = run_routed_write(rows, routed, self._row_bytes.get(key.sink_id, 0))
        if result.files:
            self._row_bytes[key.sink_id] = result.input_row_bytes
        for d in destinations:
            files = files_of(result.files, d.spec.table)
            self._metrics.record_files(d.spec.table, files, d.spec.target_file_size_bytes)
        return result


def routed_changed_keys(
    tables: Sequence[RoutedTarget],
    projection: RoutedProjection,
    deletes: DataFrame | None,
    route_column: str,
    case_sensitive: bool,
) -> dict[int, pa.Table]:
    """Every changed key of each upserted table (by its index), of its table's types: ONE Spark job."""
    rows = projection.rows
    index, bad = F.col(rows.columns[0]), F.col(rows.columns[1])
    slots: dict[int, list[str]] = {}  # table index -> its key slot columns, in key order
    for t in tables:
        names = [f.name for f in t.table.schema().fields]
        positions = projection.slots[t.index]
        slots[t.index] = [rows.columns[positions[names.index(k)]] for k in t.config.upsert.key_columns]
    types = {c: rows.schema[c].dataType for c in sorted({c for cs in slots.values() for c in cs})}
    indexes = [t.index for t in tables]
    written = rows.where(index.isin(indexes) & ~bad).select(index.alias(_INDEX), *[F.col(c) for c in types])
    if deletes is not None:
        written = written.union(_deleted_keys(tables, deletes, route_column, slots, types, case_sensitive))
    collected = written.toArrow()
    keys: dict[int, pa.Table] = {}
    for t in tables:
        mine = collected.filter(pc.equal(collected.column(_INDEX), t.index)).select(slots[t.index])
        keys[t.index] = mine.rename_columns(list(t.config.upsert.key_columns)).drop_null()
    return keys


def _deleted_keys(
    tables: Sequence[RoutedTarget],
    deletes: DataFrame,
    route_column: str,
    slots: Mapping[int, list[str]],
    types: Mapping[str, DataType],
    case_sensitive: bool,
) -> DataFrame:
    """The deletes' keys in the columns of the written keys (each slot of its tables' type)."""
    pairs = [c for t in tables for v in t.values for c in (F.lit(v), F.lit(t.index))]
    index = F.element_at(F.create_map(*pairs), destination_value(F.col(quoted(route_column))))
    columns = []
    for slot, spark_type in types.items():
        users = [t for t in tables if slot in slots[t.index]]
        name = users[0].config.upsert.key_columns[slots[users[0].index].index(slot)]
        raw = _column(deletes, name, case_sensitive)
        value = raw.try_cast(spark_type) if raw is not None else F.lit(None).cast(spark_type)
        columns.append(F.when(index.isin([t.index for t in users]), value).alias(slot))
    return deletes.select(index.alias(_INDEX), *columns)


def _column(df: DataFrame, name: str, case_sensitive: bool) -> Column | None:
    found = next(
        (c for c in df.columns if c == name or (not case_sensitive and c.lower() == name.lower())), None
    )
    return F.col(quoted(found)) if found is not None else None
