"""Step 4 on the driver: the write spec of a batch, its attempt record, and the write job.

The executors' side is :mod:`sink.write.task`; this module decides what they are told
(:class:`~sink.write.spec.WriteSpec`), records the attempt first (so a crash leaves
files a restart can find, :mod:`sink.commit.recovery`), runs the job and turns its
failure into an error of the sink.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.table import Table
from pyspark.sql import DataFrame

from sink.arrow_source import ArrowSource
from sink.catalog import executor_io_properties
from sink.commit.recovery import AttemptLog, AttemptRecord, attempt_location
from sink.config import SinkConfig
from sink.errors import BadRecordError, SchemaError, WriteError, find_error_code
from sink.log_context import batch_logger
from sink.metrics import SinkMetrics
from sink.normalize import NormalizedBatch, bad_record_error
from sink.route.routed import RoutedBatch
from sink.source_write import SourceWrite
from sink.worker_python import worker_import_error
from sink.write.messages import DataFileMessage, RowCounts, WriteResult
from sink.write.spec import WriteSpec
from sink.write.task import ArrowFunction, run_write

if TYPE_CHECKING:
    from sink.route.skew import BatchProfile
    from sink.sink_state import SinkState

logger = batch_logger(__name__)

_TARGET_FILE_SIZE = ("write.target-file-size-bytes", "target_file_size_bytes")


@dataclass(frozen=True)
class WrittenBatch:
    """What step 4 hands to the stage step: a batch's data files, not yet committed.

    Attributes:
        batch_id: The micro-batch.
        attempt: This attempt's id (part of every file name).
        files: The data files written.
        counts: The rows the write received and the bad rows it dropped.
        attempts: The attempt log that records this attempt until it is staged or committed.
        location: The folder this attempt's files are written under (its own).
    """

    batch_id: int
    attempt: str
    files: list[DataFileMessage]
    counts: RowCounts
    attempts: AttemptLog
    location: str

    def end_attempt(self) -> None:
        """The files are accounted for elsewhere (staged or committed): drop the attempt record."""
        self.attempts.end(self.batch_id, self.attempt)


class BatchWriter:
    """Runs step 4 of each micro-batch for one sink configuration.

    Args:
        config: The sink's configuration.
        metrics: Where the write step is timed and the files are recorded.
    """

    def __init__(self, config: SinkConfig, metrics: SinkMetrics) -> None:
        self.config = config
        self.metrics = metrics

    def target_file_size(self, table: Table) -> int:
        """The target data file size of ``table``: the sink option, else the table property."""
        return int(self._setting(table.metadata.properties, *_TARGET_FILE_SIZE))

    def write(
        self,
        table: Table,
        state: SinkState,
        batch_id: int,
        normalized: NormalizedBatch,
        routed: RoutedBatch,
        fused: ArrowSource | None,
        by_source: SourceWrite | None = None,
    ) -> WrittenBatch:
        """Write the batch's data files (``fused``: the tasks make the rows themselves).

        With ``by_source``, the source's tasks wrote some of the batch's rows already
        (:mod:`sink.source_write`): the rest are written as the same attempt, and the
        batch is the files of both. What the write received is recorded in ``state``'s
        routing history, for the next batch.
        """
        name, sink_id, last = self.config.table, state.sink_id, state.routing.last
        attempt = uuid.uuid4().hex[:16] if by_source is None else by_source.attempt
        # A fused batch's rows are made in the task, with no flag: none of them can be bad.
        flagged = normalized.bad_row_flag and fused is None
        spec = self._write_spec(table, sink_id, batch_id, attempt, routed, flagged)
        if by_source is None:
            attempts = AttemptLog.for_sink(self.config, table, sink_id)
            attempts.begin(AttemptRecord(sink_id, batch_id, attempt, spec.file_prefix, spec.data_location))
        else:  # recorded before the source's tasks ran
            attempts = by_source.tables[name].attempts
        with self.metrics.time_step(name, "write"):
            if by_source is not None and by_source.remaining_rows == 0:
                result = WriteResult([], RowCounts(0, 0))
            elif fused is not None:
                logger.info(
                    "batch %s of sink %s: the write tasks make the rows themselves", batch_id, sink_id
                )
                result = self._run_write(fused.df, spec, batch_id, last, before=fused.function)
            else:
                result = self._run_write(routed.df, spec, batch_id, last, in_driver=routed.in_driver)
        files = result.files if by_source is None else by_source.files + result.files
        self.metrics.record_files(name, files, spec.target_file_size_bytes)
        # Rows as the write tasks received them; a fused batch's maker counted them before that.
        counts = result.counts if fused is None else RowCounts(fused.rows, 0)
        if by_source is not None:
            counts = RowCounts(counts.input_rows + by_source.rows, counts.bad_rows)
        state.routing.record(files, result.source_partitions, result.input_row_bytes, routed.bucket_check)
        return WrittenBatch(batch_id, attempt, files, counts, attempts, spec.data_location)

    def _write_spec(
        self, table: Table, sink_id: str, batch_id: int, attempt: str, routed: RoutedBatch, bad_row_flag: bool
    ) -> WriteSpec:
        return self.write_spec(table, sink_id, batch_id, attempt, routed.task_options(), bad_row_flag)

    def write_spec(
        self,
        table: Table,
        sink_id: str,
        batch_id: int,
        attempt: str,
        task_options: Mapping[str, Any],
        bad_row_flag: bool = False,
    ) -> WriteSpec:
        """The write spec of one attempt of a batch on ``table`` (``task_options``: of the routing)."""
        properties = table.metadata.properties
        data_location = properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
        write = self.config.write
        return WriteSpec(
            table=self.config.table,
            schema=table.schema(),
            partition_spec=table.spec(),
            data_location=attempt_location(data_location, f"{_short(sink_id)}-b{batch_id}-{attempt}"),
            io_properties=executor_io_properties(self.config, table),
            table_properties=dict(properties),
            file_prefix=f"{_short(sink_id)}-b{batch_id}-{attempt}",
            target_file_size_bytes=int(
                self._setting(properties, "write.target-file-size-bytes", "target_file_size_bytes")
            ),
            row_group_size_bytes=write.row_group_size_bytes,
            memory_budget_bytes=write.memory_budget_bytes,
            compression=str(
                self._setting(properties, "write.parquet.compression-codec", "compression_codec")
            ),
            bad_row_flag=bad_row_flag,
            **task_options,
        )

    def _setting(self, properties: Mapping[str, str], table_property: str, field: str) -> Any:
        """A write setting: the sink option when given, else the table property, else the default."""
        write = self.config.write
        if field in write.model_fields_set:
            return getattr(write, field)
        return properties.get(table_property, getattr(write, field))

    def _run_write(
        self,
        df: DataFrame,
        spec: WriteSpec,
        batch_id: int,
        last: BatchProfile | None,
        *,
        in_driver: bool = False,
        before: ArrowFunction | None = None,
    ) -> WriteResult:
        row_bytes = last.input_row_bytes if last is not None else 0
        try:
            return run_write(df, spec, in_driver=in_driver, before=before, row_bytes=row_bytes)
        except Exception as e:
            error = find_error_code(str(e))
            if error is SchemaError:
                raise
            bad_record = bad_record_error(str(e), spec.table, batch_id) if error is BadRecordError else None
            if bad_record is not None:
                raise bad_record from e
            worker = worker_import_error(e, df, spec.table, batch_id)
            if worker is not None:
                raise worker from e
            raise WriteError(
                f"write job of batch {batch_id} failed: {_first_line(e)}",
                table=spec.table,
                batch_id=batch_id,
                file_prefix=spec.file_prefix,
            ) from e


def _short(sink_id: str) -> str:
    return sink_id.replace("-", "")[:12]


def _first_line(error: BaseException) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ICESINK-" in line:
            return line.strip()
    return text.splitlines()[0] if text else type(error).__name__
