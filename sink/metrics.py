"""Prometheus metrics of a sink, fed on the driver.

One :class:`SinkMetrics` owns a prometheus-client registry. Executors report what
they did inside their data-file messages; the driver records those and the commit
outcomes here, and a ``StreamingQueryListener`` (:mod:`sink.progress`) adds the
streaming progress. :mod:`sink.metrics_server` serves the registry over HTTP or pushes
it to a Pushgateway. Labels are of low cardinality only: table, sink id, step,
outcome, kind, action; never a batch id or a partition value.

The names here are the contract with ``monitoring/`` (dashboard and alert rules); a
test keeps them in agreement.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sink.write.messages import DataFileMessage

logger = logging.getLogger(__name__)

#: Steps of a micro-batch timed in ``icesink_step_duration_seconds``.
STEPS = ("normalize", "schema", "route", "write", "commit")
#: Outcomes of ``icesink_batches_total``.
BATCH_OUTCOMES = ("committed", "empty", "replay_skipped")
#: Outcomes of ``icesink_commits_total``.
COMMIT_OUTCOMES = ("committed", "failed")
#: Actions of ``icesink_orphan_files_total``.
ORPHAN_ACTIONS = ("deleted", "kept")
#: Kinds of ``icesink_schema_changes_total`` (the schema change objects' kinds).
SCHEMA_CHANGE_KINDS = ("add_column", "widen_type", "make_optional")
#: Outcomes of ``icesink_schema_checks_total`` (:class:`sink.schema.coordinator.SchemaCheck`).
SCHEMA_CHECK_OUTCOMES = ("unchanged", "refreshed", "evolved", "already_applied")
#: Reasons of ``icesink_dead_letter_reasons_total`` (:class:`sink.schema.conversion.BadRecordReason`).
DEAD_LETTER_REASONS = (
    "parse_error",
    "out_of_range",
    "precision_loss",
    "type_mismatch",
    "null_in_required",
    "duplicate_key",
)

#: Buckets of the file size histograms, as fractions of the target file size.
FILE_SIZE_RATIOS = (1 / 64, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2)
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_LOCK_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024


def file_size_buckets(target_bytes: int) -> tuple[float, ...]:
    """Histogram buckets around the target file size (1/64x ... 2x)."""
    return tuple(target_bytes * f for f in FILE_SIZE_RATIOS)


@dataclass(frozen=True)
class SinkIdentity:
    """Which table and sink id a streaming query writes through (labels of its progress)."""

    table: str
    sink_id: str


@dataclass(frozen=True)
class _BatchContext:
    table: str
    sink_id: str
    batch_id: int
    snapshot_id: int | None


class SinkMetrics:
    """The sink's metrics, in their own registry.

    Attributes are the prometheus-client metrics; feed them directly
    (``metrics.dead_letter_rows.labels(table, sink_id).inc(n)``) or through the
    ``record_*`` methods. :meth:`start_sink` creates every label set of a (table, sink
    id) at zero, so each series exists from the sink's start and alerts built on
    ``increase()`` see the first event.

    Args:
        registry: Registry to register in (a new one by default).
        target_file_size_bytes: Centre of the file size histogram's buckets, and the
            target assumed when :meth:`record_files` is not told the effective one.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.target_file_size_bytes = target_file_size_bytes
        self._lock = threading.Lock()
        self._started: set[tuple[str, str]] = set()
        self._queries: dict[str, SinkIdentity] = {}
        self._context = threading.local()
        self._define_write_metrics()
        self._define_commit_metrics()
        self._define_schema_metrics()
        self._define_progress_metrics()

    def _define_write_metrics(self) -> None:
        r = self.registry
        self.rows_written = Counter(
            "icesink_rows_written_total", "Rows committed to the table", ["table", "sink_id"], registry=r
        )
        self.dead_letter_rows = Counter(
            "icesink_dead_letter_rows_total",
            "Rows sent to the dead-letter table instead of the table",
            ["table", "sink_id"],
            registry=r,
        )
        self.dead_letter_reasons = Counter(
            "icesink_dead_letter_reasons_total",
            "Rows sent to the dead-letter table, by reason (parse_error, out_of_range, ...)",
            ["table", "reason"],
            registry=r,
        )
        self.bytes_written = Counter(
            "icesink_bytes_written_total", "Data file bytes committed", ["table", "sink_id"], registry=r
        )
        self.files_written = Counter(
            "icesink_files_written_total", "Data files committed", ["table", "sink_id"], registry=r
        )
        self.file_size = Histogram(
            "icesink_data_file_size_bytes",
            "Size of written data files",
            ["table"],
            buckets=file_size_buckets(self.target_file_size_bytes),
            registry=r,
        )
        self.file_size_ratio = Histogram(
            "icesink_data_file_size_ratio",
            "Size of written data files as a fraction of the target file size",
            ["table"],
            buckets=FILE_SIZE_RATIOS,
            registry=r,
        )
        self.target_file_size = Gauge(
            "icesink_target_file_size_bytes", "Target size of data files", ["table"], registry=r
        )
        self.step_seconds = Histogram(
            "icesink_step_duration_seconds",
            "Duration of each step of a micro-batch",
            ["table", "step"],
            buckets=_STEP_BUCKETS,
            registry=r,
        )
        self.open_writers = Gauge(
            "icesink_open_writers_max",
            "Most partition writers one task held open in the last batch",
            ["table"],
            registry=r,
        )
        self.buffered_bytes = Gauge(
            "icesink_buffered_bytes_max",
            "Most bytes one task's writers buffered in the last batch",
            ["table"],
            registry=r,
        )
        self.task_peak_rss = Gauge(
            "icesink_task_peak_rss_bytes",
            "Highest resident memory of a Python worker during a write task of the last batch",
            ["table"],
            registry=r,
        )

    def _define_commit_metrics(self) -> None:
        r = self.registry
        self.batches = Counter(
            "icesink_batches_total",
            "Micro-batches handled, by outcome",
            ["table", "sink_id", "outcome"],
            registry=r,
        )
        self.replays_skipped = Counter(
            "icesink_replays_skipped_total",
            "Replayed batches found already committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.commits = Counter(
            "icesink_commits_total", "Commits by outcome", ["table", "sink_id", "outcome"], registry=r
        )
        self.commit_attempts = Counter(
            "icesink_commit_attempts_total", "Commit attempts", ["table", "sink_id"], registry=r
        )
        self.commit_conflicts = Counter(
            "icesink_commit_conflicts_total",
            "Commit attempts lost to concurrent writers",
            ["table", "sink_id"],
            registry=r,
        )
        self.orphan_files = Counter(
            "icesink_orphan_files_total",
            "Files of crashed attempts found at recovery, by action",
            ["table", "action"],
            registry=r,
        )
        self.staged_bytes = Gauge(
            "icesink_staged_bytes",
            "Bytes of data files written and staged but not yet committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.staged_files = Gauge(
            "icesink_staged_files",
            "Data files written and staged but not yet committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.last_batch_id = Gauge(
            "icesink_last_committed_batch_id",
            "Last committed micro-batch id",
            ["table", "sink_id"],
            registry=r,
        )
        self.last_commit_time = Gauge(
            "icesink_last_commit_timestamp_seconds",
            "Unix time of the last successful commit",
            ["table", "sink_id"],
            registry=r,
        )
        self.start_time = Gauge(
            "icesink_sink_start_timestamp_seconds",
            "Unix time at which this process started writing as the sink",
            ["table", "sink_id"],
            registry=r,
        )

    def _define_schema_metrics(self) -> None:
        r = self.registry
        self.schema_changes = Counter(
            "icesink_schema_changes_total",
            "Schema changes applied to the table, by kind",
            ["table", "kind"],
            registry=r,
        )
        self.schema_lock_wait = Histogram(
            "icesink_schema_lock_wait_seconds",
            "Time spent waiting for the table's schema lock",
            ["table"],
            buckets=_LOCK_WAIT_BUCKETS,
            registry=r,
        )
        self.schema_lock_acquisitions = Counter(
            "icesink_schema_lock_acquisitions_total",
            "Times the table's schema lock was taken",
            ["table"],
            registry=r,
        )
        self.schema_checks = Counter(
            "icesink_schema_checks_total",
            "Batch schemas compared with the table's, by outcome (only 'evolved' and "
            "'already_applied' took the lock)",
            ["table", "outcome"],
            registry=r,
        )
        self.schema_commit_conflicts = Counter(
            "icesink_schema_commit_conflicts_total",
            "Schema commits lost to a concurrent writer and retried after a refresh",
            ["table"],
            registry=r,
        )

    def _define_progress_metrics(self) -> None:
        r = self.registry
        self.input_rows = Counter(
            "icesink_input_rows_total",
            "Rows read by the streaming query (its progress reports)",
            ["table", "sink_id"],
            registry=r,
        )
        self.input_rows_per_second = Gauge(
            "icesink_input_rows_per_second",
            "Rate at which rows arrived, over the last micro-batch",
            ["table", "sink_id"],
            registry=r,
        )
        self.processed_rows_per_second = Gauge(
            "icesink_processed_rows_per_second",
            "Rate at which rows were processed, over the last micro-batch",
            ["table", "sink_id"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "icesink_batch_duration_seconds",
            "Duration of whole micro-batches (Spark's batchDuration)",
            ["table", "sink_id"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.offsets_behind_latest = Gauge(
            "icesink_source_offsets_behind_latest",
            "Kafka offsets between the end of the last micro-batch and the latest offsets, "
            "summed over partitions (where the source reports them)",
            ["table", "sink_id"],
            registry=r,
        )

    # --- life cycle -------------------------------------------------------------------

    def start_sink(self, table: str, sink_id: str, query_id: str | None = None) -> None:
        """Create every label set of ``(table, sink_id)`` at zero (once) and bind its query.

        Args:
            table: The table's name.
            sink_id: The sink id.
            query_id: The streaming query writing through this sink id, so that its
                progress events are labelled with the table and the sink id.
        """
        with self._lock:
            if query_id:
                self._queries[query_id] = SinkIdentity(table, sink_id)
            if (table, sink_id) in self._started:
                return
            self._started.add((table, sink_id))
        for counter in (
            self.rows_written,
            self.dead_letter_rows,
            self.bytes_written,
            self.files_written,
            self.replays_skipped,
            self.commit_attempts,
            self.commit_conflicts,
            self.input_rows,
        ):
            counter.labels(table, sink_id).inc(0)
        for outcome in BATCH_OUTCOMES:
            self.batches.labels(table, sink_id, outcome).inc(0)
        for outcome in COMMIT_OUTCOMES:
            self.commits.labels(table, sink_id, outcome).inc(0)
        for action in ORPHAN_ACTIONS:
            self.orphan_files.labels(table, action).inc(0)
        for kind in SCHEMA_CHANGE_KINDS:
            self.schema_changes.labels(table, kind).inc(0)
        for outcome in SCHEMA_CHECK_OUTCOMES:
            self.schema_checks.labels(table, outcome).inc(0)
        for reason in DEAD_LETTER_REASONS:
            self.dead_letter_reasons.labels(table, reason).inc(0)
        self.schema_lock_acquisitions.labels(table).inc(0)
        self.schema_commit_conflicts.labels(table).inc(0)
        self.schema_lock_wait.labels(table)
        for step in STEPS:
            self.step_seconds.labels(table, step)
        self.file_size.labels(table)
        self.file_size_ratio.labels(table)
        self.batch_seconds.labels(table, sink_id)
        self.staged_bytes.labels(table, sink_id).set(0)
        self.staged_files.labels(table, sink_id).set(0)
        self.start_time.labels(table, sink_id).set(time.time())
        logger.info("metrics of sink %s for table %s started", sink_id, table)

    def begin_batch(
        self,
        table: str,
        sink_id: str,
        batch_id: int,
        query_id: str | None = None,
        snapshot_id: int | None = None,
    ) -> None:
        """A micro-batch starts on this thread: start the sink once and remember the ids.

        The steps timed by :meth:`time_step` on this thread afterwards are logged with
        the sink id, the batch id, the table and the snapshot the batch builds on.
        """
        self.start_sink(table, sink_id, query_id)
        self._context.batch = _BatchContext(table, sink_id, batch_id, snapshot_id)

    def sink_of_query(self, query_id: str) -> SinkIdentity | None:
        """The table and sink id a streaming query writes through, once its first batch started."""
        with self._lock:
            return self._queries.get(query_id)

    # --- recording ----------------------------------------------------------------------

    @contextmanager
    def time_step(self, table: str, step: str) -> Iterator[None]:
        """Time one step of a micro-batch (and log it at INFO with the batch's ids)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.step_seconds.labels(table, step).observe(elapsed)
            context: _BatchContext | None = getattr(self._context, "batch", None)
            if context is not None and context.table == table:
                logger.info(
                    "batch %s of sink %s, table %s (base snapshot %s): step %s took %.3f s",
                    context.batch_id,
                    context.sink_id,
                    table,
                    context.snapshot_id,
                    step,
                    elapsed,
                )
            else:
                logger.info("table %s: step %s took %.3f s", table, step, elapsed)

    def record_files(
        self, table: str, files: Sequence[DataFileMessage], target_file_size_bytes: int | None = None
    ) -> None:
        """Writer-side figures reported by the executors.

        Args:
            table: The table's name.
            files: The data files of a micro-batch.
            target_file_size_bytes: The effective target (option or table property);
                the constructor's when not given.
        """
        target = target_file_size_bytes or self.target_file_size_bytes
        self.target_file_size.labels(table).set(target)
        for message in files:
            self.file_size.labels(table).observe(message.file_size_bytes)
            self.file_size_ratio.labels(table).observe(message.file_size_bytes / target)
        if files:
            self.open_writers.labels(table).set(max(m.open_writers_peak for m in files))
            self.buffered_bytes.labels(table).set(max(m.buffered_bytes_peak for m in files))
            self.task_peak_rss.labels(table).set(max(m.task_peak_rss_bytes for m in files))

    def record_commit(
        self,
        table: str,
        sink_id: str,
        batch_id: int,
        files: Sequence[DataFileMessage],
        attempts: int,
        conflicts: int,
    ) -> None:
        """A successful commit."""
        self.rows_written.labels(table, sink_id).inc(sum(m.record_count for m in files))
        self.bytes_written.labels(table, sink_id).inc(sum(m.file_size_bytes for m in files))
        self.files_written.labels(table, sink_id).inc(len(files))
        self.commits.labels(table, sink_id, "committed").inc()
        self.commit_attempts.labels(table, sink_id).inc(attempts)
        self.commit_conflicts.labels(table, sink_id).inc(conflicts)
        self.last_batch_id.labels(table, sink_id).set(batch_id)
        self.last_commit_time.labels(table, sink_id).set(time.time())

    def record_staged(self, table: str, sink_id: str, files: Sequence[DataFileMessage]) -> None:
        """What is staged but not yet committed for ``(table, sink_id)`` (replaces the last value)."""
        self.staged_bytes.labels(table, sink_id).set(sum(m.file_size_bytes for m in files))
        self.staged_files.labels(table, sink_id).set(len(files))

    def record_progress(
        self,
        sink: SinkIdentity,
        *,
        input_rows: int,
        input_rows_per_second: float,
        processed_rows_per_second: float,
        batch_duration_s: float | None,
        offsets_behind_latest: int | None,
    ) -> None:
        """One progress report of a streaming query (see :mod:`sink.progress`)."""
        labels = (sink.table, sink.sink_id)
        self.input_rows.labels(*labels).inc(max(input_rows, 0))
        self.input_rows_per_second.labels(*labels).set(input_rows_per_second)
        self.processed_rows_per_second.labels(*labels).set(processed_rows_per_second)
        if batch_duration_s is not None:
            self.batch_seconds.labels(*labels).observe(batch_duration_s)
        if offsets_behind_latest is not None:
            self.offsets_behind_latest.labels(*labels).set(offsets_behind_latest)

    def record_idle(self, sink: SinkIdentity) -> None:
        """The query is idle or stopped: nothing arrives, nothing is processed."""
        self.input_rows_per_second.labels(sink.table, sink.sink_id).set(0)
        self.processed_rows_per_second.labels(sink.table, sink.sink_id).set(0)
