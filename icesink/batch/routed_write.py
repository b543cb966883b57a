"""Step 4 of a routed batch: each table's attempt on record, then ONE Spark job writes every table's files.

Unless ``write.distribution-mode`` asks for a shuffle (:mod:`icesink.route.routed_shuffle`),
routed writes are not shuffled. Either way each task splits its rows by table and computes
their partition values itself (:mod:`icesink.write.routed_task`), so a routed table's partition
spec must be computable from Arrow columns (:func:`~icesink.batch.tables.check_keys_in_task`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from icesink.batch.write_job import write_failures
from icesink.destinations.projection import RoutedProjection
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
