"""Prometheus metrics of a sink, fed on the driver.

One :class:`SinkMetrics` owns a prometheus-client registry. Executors report what
they did inside their data-file messages; the driver records those and the commit
outcomes here, and a ``StreamingQueryListener`` (:mod:`icesink.progress`) adds the
streaming progress. :mod:`icesink.metrics_server` serves the registry over HTTP or pushes
it to a Pushgateway. Labels are of low cardinality only: table, sink id, step,
outcome, kind, action; never a batch id or a partition value. The ``table`` label is
bounded (:mod:`icesink.metric_labels`): past ``metrics.max-tables`` tables, further
tables are recorded under ``table="_other"``. The families themselves
(names, help, labels, buckets) are in :mod:`icesink.metric_families`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from icesink.metric_families import (
    BATCH_OUTCOMES,
    COMMIT_OUTCOMES,
    DEAD_LETTER_REASONS,
    DEFAULT_TARGET_FILE_SIZE_BYTES,
    ORPHAN_ACTIONS,
    SCHEMA_CHANGE_KINDS,
    SCHEMA_CHECK_OUTCOMES,
    SKIP_REASONS,
    STEPS,
    MetricFamilies,
)
from icesink.metric_labels import DEFAULT_MAX_TABLES, TableLabelLimit
from icesink.write.messages import DataFileMessage

logger = logging.getLogger(__name__)

KEPT_RECORD_COUNTS = 16  # per query: batches counted by the batch function whose progress is still to come


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


class SinkMetrics(MetricFamilies):
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
        max_tables: How many tables get series of their own (``metrics.max-tables``);
            the series of further tables are recorded under ``table="_other"``.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        target_file_size_bytes: int = DEFAULT_TARGET_FILE_SIZE_BYTES,
        max_tables: int = DEFAULT_MAX_TABLES,
    ) -> None:
        super().__init__(registry or CollectorRegistry(), target_file_size_bytes, TableLabelLimit(max_tables))
        self._lock = threading.Lock()
        self._started: set[tuple[str, str]] = set()
        self._queries: dict[str, SinkIdentity] = {}
        self._source_records: dict[str, dict[int, int]] = {}
        self._context = threading.local()

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
            self.upserted_keys,
            self.deleted_keys,
            self.delete_files,
            self.key_index_entries_read,
            self.key_index_rebuilds,
            self.key_index_catchup_files,
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
        for reason in SKIP_REASONS:
            self.source_records_skipped.labels(table, reason).inc(0)
        self.schema_lock_acquisitions.labels(table).inc(0)
        self.schema_commit_conflicts.labels(table).inc(0)
        self.schema_lock_wait.labels(table)
        self.start_maintenance(table)
        for step in STEPS:
            self.step_seconds.labels(table, step)
        self.file_size.labels(table)
        self.file_size_ratio.labels(table)
        self.batch_seconds.labels(table, sink_id)
        self.staged_bytes.labels(table, sink_id).set(0)
        self.staged_files.labels(table, sink_id).set(0)
        self.start_time.labels(table, sink_id).set(time.time())
        logger.info("metrics of sink %s for table %s started", sink_id, table)

    @contextmanager
    def batch(
        self,
        table: str,
        sink_id: str,
        batch_id: int,
        query_id: str | None = None,
        snapshot_id: int | None = None,
    ) -> Iterator[None]:
        """A micro-batch runs on this thread inside: start the sink once and remember the ids.

        The steps timed by :meth:`time_step` on this thread inside are logged with the sink
        id, the batch id, the table and the snapshot the batch builds on; steps after it
        (a caller's next batch being planned or decoded) name no batch.
        """
        self.start_sink(table, sink_id, query_id)
        outer = getattr(self._context, "batch", None)
        self._context.batch = _BatchContext(table, sink_id, batch_id, snapshot_id)
        try:
            yield
        finally:
            self._context.batch = outer

    def sink_of_query(self, query_id: str) -> SinkIdentity | None:
        """The table and sink id a streaming query writes through, once its first batch started."""
        with self._lock:
            return self._queries.get(query_id)

    def count_source_records(self, query_id: str, batch_id: int, records: int) -> None:
        """The records a micro-batch read, where the query's source yields rows of another kind.

        A source that decodes as it reads (the Kafka job's default) hands Spark a few rows
        per task, so Spark's progress counts those. The batch's progress report then takes
        this count instead, and its rates are scaled to it (see :mod:`icesink.progress`). The
        counts of the last :data:`KEPT_RECORD_COUNTS` batches of a query wait for their report.
        """
        with self._lock:
            counts = self._source_records.setdefault(query_id, {})
            counts[batch_id] = records
            for old in sorted(counts)[:-KEPT_RECORD_COUNTS]:
                del counts[old]

    def source_records(self, query_id: str, batch_id: int) -> int | None:
        """The count :meth:`count_source_records` took for that batch (handed out once), or ``None``."""
        with self._lock:
            return self._source_records.get(query_id, {}).pop(batch_id, None)

    # --- recording ----------------------------------------------------------------------

    @contextmanager
    def time_commit(self, table: str, sink_id: str) -> Iterator[None]:
        """Time a commit step (:meth:`time_step`); one that raises is counted as a failed commit."""
        with self.time_step(table, "commit"):
            try:
                yield
            except Exception:
                self.commits.labels(table, sink_id, "failed").inc()
                raise

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
            self.task_seconds.labels(table, "input").set(max(m.task_input_seconds for m in files))
            self.task_seconds.labels(table, "close").set(max(m.task_close_seconds for m in files))

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

    def record_replay(self, table: str, sink_id: str) -> None:
        """A replayed batch found already committed to ``table`` (skipped, nothing written again)."""
        self.replays_skipped.labels(table, sink_id).inc()
        self.batches.labels(table, sink_id, "replay_skipped").inc()

    def record_orphans(self, table: str, deleted: Sequence[str], kept: Sequence[str]) -> None:
        """What a recovery found of crashed attempts' files on ``table``: deleted, or kept (referenced)."""
        if deleted:
            self.orphan_files.labels(table, "deleted").inc(len(deleted))
        if kept:
            self.orphan_files.labels(table, "kept").inc(len(kept))

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
        """One progress report of a streaming query (see :mod:`icesink.progress`)."""
        labels = (sink.table, sink.sink_id)
        self.input_rows.labels(*labels).inc(max(input_rows, 0))
        self.input_rows_per_second.labels(*labels).set(input_rows_per_second)
        self.processed_rows_per_second.labels(*labels).set(processed_rows_per_second)
        if batch_duration_s is not None:
            self.batch_seconds.labels(*labels).observe(batch_duration_s)
        if offsets_behind_latest is not None:
            self.offsets_behind_latest.labels(*labels).set(offsets_behind_latest)
        self.source_connected.labels(*labels).set(1)

    def record_idle(self, sink: SinkIdentity, *, source_answered: bool = True) -> None:
        """The query is idle (its source answered: nothing new) or stopped: nothing is processed."""
        self.input_rows_per_second.labels(sink.table, sink.sink_id).set(0)
        self.processed_rows_per_second.labels(sink.table, sink.sink_id).set(0)
        if source_answered:
            self.source_connected.labels(sink.table, sink.sink_id).set(1)

    def record_source_lost(self, sink: SinkIdentity) -> None:
        """The query failed because its source cannot reach its brokers: its lag is unknown (NaN)."""
        self.source_connected.labels(sink.table, sink.sink_id).set(0)
        self.offsets_behind_latest.labels(sink.table, sink.sink_id).set(float("nan"))
