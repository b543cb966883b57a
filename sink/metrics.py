"""Prometheus metrics of a sink, fed on the driver.

One :class:`SinkMetrics` owns a prometheus-client registry. Executors report what
they did inside their data-file messages; the driver records those and the commit
outcomes here. Labels are of low cardinality only: table, sink id, step, outcome.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from sink.write.messages import DataFileMessage

_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def file_size_buckets(target_bytes: int) -> tuple[float, ...]:
    """Histogram buckets around the target file size (1/64x ... 2x)."""
    return tuple(
        target_bytes * f for f in (1 / 64, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2)
    )


class SinkMetrics:
    """The sink's metrics, in their own registry.

    Args:
        registry: Registry to register in (a new one by default).
        target_file_size_bytes: Centre of the file size histogram's buckets.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, target_file_size_bytes: int = 512 * 1024 * 1024
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.rows_written = Counter(
            "icesink_rows_written_total", "Rows committed to the table", ["table", "sink_id"], registry=r
        )
        self.bytes_written = Counter(
            "icesink_bytes_written_total", "Data file bytes committed", ["table", "sink_id"], registry=r
        )
        self.files_written = Counter(
            "icesink_files_written_total", "Data files committed", ["table", "sink_id"], registry=r
        )
        self.file_size = Histogram(
            "icesink_data_file_size_bytes",
            "Size of committed data files",
            ["table"],
            buckets=file_size_buckets(target_file_size_bytes),
            registry=r,
        )
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
        self.step_seconds = Histogram(
            "icesink_step_duration_seconds",
            "Duration of each step of a micro-batch",
            ["table", "step"],
            buckets=_STEP_BUCKETS,
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

    @contextmanager
    def time_step(self, table: str, step: str) -> Iterator[None]:
        """Time one step of a micro-batch."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.step_seconds.labels(table, step).observe(time.perf_counter() - start)

    def record_files(self, table: str, files: Sequence[DataFileMessage]) -> None:
        """Writer-side figures reported by the executors."""
        for message in files:
            self.file_size.labels(table).observe(message.file_size_bytes)
        if files:
            self.open_writers.labels(table).set(max(m.open_writers_peak for m in files))
            self.buffered_bytes.labels(table).set(max(m.buffered_bytes_peak for m in files))

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
