"""Step 4 of a routed batch: each table's attempt on record, then ONE Spark job writes every table's files.

Unless ``write.distribution-mode`` asks for a shuffle (:mod:`sink.route.routed_shuffle`),
routed writes are not shuffled. Either way each task splits its rows by table and computes
their partition values itself (:mod:`sink.write.routed_task`), so a routed table's partition
spec must be computable from Arrow columns (:func:`check_keys_in_task`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from pyiceberg.table import Table

from sink.commit.recovery import AttemptLog, AttemptRecord
from sink.config import SinkConfig
from sink.destinations.projection import RoutedProjection
from sink.errors import BadRecordError, ConfigError, SchemaError, WriteError, find_error_code
from sink.metrics import SinkMetrics
from sink.normalize import bad_record_error
from sink.parallel import run_parallel
from sink.route.routed_shuffle import routed_mode, shuffle_routed
from sink.source_write import SourceWrite
from sink.worker_python import worker_import_error
from sink.write.keys import arrow_key_functions
from sink.write.messages import WriteResult
from sink.write.routed_task import DestinationSpec, RoutedWriteSpec, run_routed_write
from sink.write_step import BatchWriter


@dataclass
class RoutedTarget:
    """A table the batch writes: its configuration, table, columns offered and values routed to it."""

    name: str
    config: SinkConfig
    table: Table
    columns: tuple[int, ...]
    values: tuple[str, ...]
    index: int = -1
    attempts: AttemptLog | None = None
    file_prefix: str = ""  # of the batch attempt, on this table
    location: str = ""


class RoutedWrites:
    """Step 4 of a sink's routed batches: each table's attempt on record, then ONE write job.

    It remembers, per sink id, how wide the rows of its last write came, so that the next
    write job can run without Spark's byte check on every row (:mod:`sink.write.arrow_input`).

    Args:
        memory_budget_bytes: A write task's, for all its tables together.
        metrics: Where the write step is timed and each table's files are recorded.
        label: What names the sink where no single table does.
    """

    def __init__(self, memory_budget_bytes: int, metrics: SinkMetrics, label: str) -> None:
        self._budget = memory_budget_bytes
        self._metrics = metrics
        self._label = label
        self._row_bytes: dict[str, int] = {}  # sink id -> the widest rows of its last write

    def write(
        self,
        projection: RoutedProjection,
        targets: list[RoutedTarget],
        sink_id: str,
        batch_id: int,
        attempt: str,
        by_source: SourceWrite | None = None,
    ) -> WriteResult:
        """Record each table's attempt, then write every table's files in ONE Spark job.

        Each target gets its attempt's file prefix and folder. The tables of ``by_source``
        have the attempt on record already (the source's tasks wrote to them first).
        """
        planned = by_source.tables if by_source is not None else {}
        destinations: list[DestinationSpec] = []
        records: list[Callable[[], None]] = []
        for target in targets:
            writer = BatchWriter(target.config, self._metrics)
            in_task = {
                "num_data_columns": len(target.table.schema().fields),
                "partition_values_in_task": True,
            }
            spec = writer.write_spec(target.table, sink_id, batch_id, attempt, in_task)
            if target.name in planned:
                target.attempts = planned[target.name].attempts
            else:
                target.attempts = AttemptLog.for_sink(target.config, target.table, sink_id)
                record = AttemptRecord(sink_id, batch_id, attempt, spec.file_prefix, spec.data_location)
                records.append(functools.partial(target.attempts.begin, record))
            target.file_prefix, target.location = spec.file_prefix, spec.data_location
            destinations.append(DestinationSpec(target.index, spec, projection.slots[target.index]))
        run_parallel(records)  # every attempt is on record before any file is written
        mode = routed_mode(t.config.write.distribution_mode for t in targets)
        routed = RoutedWriteSpec(tuple(destinations), self._budget)
        rows, routed = shuffle_routed(projection.rows, routed, mode, log=(batch_id, sink_id))
        with self._metrics.time_step(self._label, "write"):
            try:
                result = run_routed_write(rows, routed, self._row_bytes.get(sink_id, 0))
            except Exception as e:
                worker = worker_import_error(e, projection.rows, self._label, batch_id)
                raise (worker or _write_error(e, self._label, batch_id)) from e
        if result.files:
            self._row_bytes[sink_id] = result.input_row_bytes
        for d in destinations:
            files = [f for f in result.files if f.table == d.spec.table]
            self._metrics.record_files(d.spec.table, files, d.spec.target_file_size_bytes)
        return result


def check_keys_in_task(table: Table, name: str) -> None:
    """Routed writes compute partition values in the task: the table's spec must allow it."""
    if table.spec().fields and arrow_key_functions(table.spec(), table.schema()) is None:
        raise ConfigError(
            f"table {name} is partitioned by {table.spec()}, whose values a routed write cannot compute "
            "in its write tasks (a transform of a nested or decimal column)",
            table=name,
            hint="partition routed tables by top-level columns of int, long, date, time, timestamp, "
            "string or binary type (route.table-options partition-by)",
        )


def _write_error(error: Exception, label: str, batch_id: int) -> Exception:
    """The sink's error for a failed routed write job (it reaches the driver as text)."""
    found = find_error_code(str(error))
    if found is SchemaError and isinstance(error, SchemaError):
        return error
    if found is BadRecordError:
        bad = bad_record_error(str(error), label, batch_id)
        if bad is not None:
            return bad
    first = next(
        (line.strip() for line in str(error).splitlines() if "ICESINK-" in line), type(error).__name__
    )
    return WriteError(f"routed write job of batch {batch_id} failed: {first}", table=label, batch_id=batch_id)
