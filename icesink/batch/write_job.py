"""The write job on the driver: run it for a table batch and turn its failure into an error of the sink.

The executors' side is :mod:`icesink.write.task`; the table batch (:mod:`icesink.batch.table_batch`)
decides what they are told (its :class:`~icesink.write.spec.WriteSpec`) and records the attempt
first (so a crash leaves files a restart can find, :mod:`icesink.commit.recovery`). A failed write
job reaches the driver as text: :func:`write_failure` is the one place it becomes the sink's
error (for a table's write, a routed write and the dead letters' alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icesink.batch.commits import Written
from icesink.batch.write_errors import write_failures
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.normalize import NormalizedBatch
from icesink.route.routed import RoutedBatch
from icesink.route.router import BucketRouter
from icesink.write.messages import RowCounts, WriteResult
from icesink.write.task import run_write

if TYPE_CHECKING:
    from icesink.batch.arrow_source import ArrowSource
    from icesink.batch.source_write import SourceWrite
    from icesink.batch.table_batch import TableBatch

logger = batch_logger(__name__)


class BatchWriter:
    """Distributes a table batch's rows and runs its write job.

    Args:
        metrics: Where the write step is timed and the files are recorded.
    """

    def __init__(self, metrics: SinkMetrics) -> None:
        self.metrics = metrics

    def distribute(self, batch: TableBatch, normalized: NormalizedBatch) -> RoutedBatch:
        """The batch's rows distributed to their write tasks (:mod:`icesink.route.router`)."""
        table, key = batch.table, batch.key
        router = BucketRouter.for_table(
            table,
            batch.config.write.distribution_mode,
            batch.state.routing,
            batch.config.write.target_file_size(table.metadata.properties),
            table_name=batch.name,
            sink_id=key.sink_id,
            batch_id=key.batch_id,
            memory_budget_bytes=batch.config.write.memory_budget_bytes,
        )
        return router.route(normalized.rows)

    def write(
        self,
        batch: TableBatch,
        normalized: NormalizedBatch,
        routed: RoutedBatch,
        fused: ArrowSource | None,
        by_source: SourceWrite | None = None,
    ) -> tuple[Written, RowCounts]:
        """Write the batch's data files (``fused``: the tasks make the rows themselves).

        With ``by_source``, the source's tasks wrote some of the batch's rows already
        (:mod:`icesink.batch.source_write`): the rest are written as the same attempt, and the
        batch is the files of both. What the write received is recorded in the table's
        routing history, for the next batch. Returns the files and the rows the write received.
        """
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
                result = run_write(df, spec, in_driver=routed.in_driver, row_bytes=row_bytes)
        # Rows as the write tasks received them; a fused batch's maker counted them before that.
        files, counts = result.files, result.counts if fused is None else RowCounts(fused.rows, 0)
        if by_source is not None:
            files, counts = by_source.joined(files, counts)
        self.metrics.record_files(name, files, spec.target_file_size_bytes)
        batch.state.routing.record(
            files, result.source_partitions, result.input_row_bytes, routed.bucket_check
        )
        return Written(batch, files), counts
