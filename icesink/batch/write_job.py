"""A table batch's write job on the driver, and the one place a failed write job becomes the sink's error.

The executors' side is :mod:`icesink.write.task`. A failed job reaches the driver as text (a
Python worker's traceback inside Spark's): :func:`write_failures` turns it into an error naming
the table, the batch and the fix, the same way for a table's write, a routed write and the
dead letters'.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame

from icesink.errors import BadRecordError, SchemaError, WriteError, find_error_code
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.normalize import NormalizedBatch, bad_record_error
from icesink.route.routed import RoutedBatch
from icesink.route.router import BucketRouter
from icesink.worker_python import worker_import_error
from icesink.write.messages import DataFileMessage, RowCounts, WriteResult
from icesink.write.task import run_write

if TYPE_CHECKING:
    from icesink.batch.source_write import ArrowSource, SourceWrite
    from icesink.batch.table_batch import TableBatch

logger = batch_logger(__name__)


class BatchWriter:
    """Distributes a one-table batch's rows and runs its write job."""

    def __init__(self, metrics: SinkMetrics) -> None:
        self.metrics = metrics

    def distribute(
        self, batch: TableBatch, normalized: NormalizedBatch, collected: pa.Table | None = None
    ) -> RoutedBatch:
        """``normalized``'s rows routed (``collected``: already in the driver, which writes them)."""
        return self.router(batch).route(normalized.rows, collected)

    @staticmethod
    def router(batch: TableBatch) -> BucketRouter:
        """The router of ``batch``'s table, with its sink's history."""
        table, key = batch.table, batch.key
        return BucketRouter.for_table(
            table,
            batch.config.write.distribution_mode,
            batch.state.routing,
            batch.config.write.target_file_size(table.metadata.properties),
            table_name=batch.name,
            sink_id=key.sink_id,
            batch_id=key.batch_id,
            memory_budget_bytes=batch.config.write.memory_budget_bytes,
        )

    def write(
        self,
        batch: TableBatch,
        normalized: NormalizedBatch,
        routed: RoutedBatch,
        fused: ArrowSource | None,
        by_source: SourceWrite | None = None,
    ) -> tuple[list[DataFileMessage], RowCounts]:
        """Write the batch's data files; returns them and the rows the write received. ``fused``: the
        tasks make the rows themselves; ``by_source``: the source's tasks wrote some of the rows, the
        rest are written as the same attempt, and the batch is the files of both."""
        name, key, last = batch.name, batch.key, batch.state.routing.last
        # A fused batch's rows are made in the task, with no flag: none of them can be bad.
        flagged = normalized.bad_row_flag and fused is None
        spec = batch.write_spec(routed.task_options(), flagged)
        planned = by_source.tables if by_source is not None else {}
        batch.start(spec, planned)()  # on record before the write (the source's: before it ran)
        row_bytes = last.input_row_bytes if last is not None else 0
        df = fused.df if fused is not None else routed.df
        failures = write_failures(df, name, key.batch_id, spec.file_prefix)
        with self.metrics.time_step(name, "write"), failures:
            if by_source is not None and by_source.remaining_rows == 0:
                result = WriteResult([], RowCounts(0, 0))
            elif fused is not None:
                logger.info(
                    "batch %s of sink %s: the write tasks make the rows themselves", key.batch_id, key.sink_id
                )
                result = run_write(df, spec, before=fused.function, row_bytes=row_bytes)
            else:
                result = run_write(
                    df, spec, in_driver=routed.in_driver, collected=routed.collected, row_bytes=row_bytes
                )
        # Rows as the write tasks received them; a fused batch's maker counted them before that.
        files, counts = result.files, result.counts if fused is None else RowCounts(fused.rows, 0)
        if by_source is not None:
            files, counts = by_source.joined(files, counts)
        self.metrics.record_files(name, files, spec.target_file_size_bytes)
        row_bytes = fused.row_bytes if fused is not None and fused.row_bytes else result.input_row_bytes
        batch.state.routing.record(files, result.source_partitions, row_bytes, routed.bucket_check)
        return files, counts


def write_failure(
    error: Exception,
    df: DataFrame,
    table: str,
    batch_id: int,
    file_prefix: str | None = None,
    what: str = "write job",
) -> Exception:
    """The sink's error for a failed write job of ``table`` (``df``: what it wrote; ``what``: which job):
    a schema error as it is, a bad record (``dead-letter.on-bad-record=fail``) and a Python worker
    that cannot import the sink errors of their own, anything else a :class:`~icesink.errors.WriteError`
    quoting the first line that names an error code."""
    found = find_error_code(str(error))
    if found is SchemaError:
        return error
    if found is BadRecordError:
        bad = bad_record_error(str(error), table, batch_id)
        if bad is not None:
            return bad
    worker = worker_import_error(error, df, table, batch_id)
    if worker is not None:
        return worker
    return WriteError(
        f"{what} of batch {batch_id} failed: {_first_line(error)}",
        table=table,
        batch_id=batch_id,
        file_prefix=file_prefix,
    )


@contextmanager
def write_failures(
    df: DataFrame, table: str, batch_id: int, file_prefix: str | None = None, what: str = "write job"
) -> Iterator[None]:
    """Raise the failure of the write job run inside as :func:`write_failure` says."""
    try:
        yield
    except Exception as e:
        failure = write_failure(e, df, table, batch_id, file_prefix, what)
        if failure is e:
            raise
        raise failure from e


def _first_line(error: BaseException) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ICESINK-" in line:
            return line.strip()
    return text.splitlines()[0] if text else type(error).__name__
