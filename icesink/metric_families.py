"""The Prometheus metric families of a sink: names, help texts, labels and buckets.

:class:`~icesink.metrics.SinkMetrics` records into them. The names here are the contract
with ``monitoring/`` (dashboard and alert rules); a test keeps them in agreement.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from icesink.metric_families_maintenance import MaintenanceFamilies
from icesink.metric_families_upsert import UpsertFamilies
from icesink.metric_labels import (
    BoundedCounter,
    BoundedGauge,
    BoundedHistogram,
    TableLabelLimit,
)

#: Steps of a micro-batch timed in ``icesink_step_duration_seconds``.
STEPS = ("changes", "normalize", "schema", "route", "write", "keys", "lookup", "commit")
#: Phases of ``icesink_write_task_seconds_max``: receiving the rows, finishing the files after them.
TASK_PHASES = ("input", "close")
#: Outcomes of ``icesink_batches_total``.
BATCH_OUTCOMES = ("committed", "empty", "replay_skipped")
#: Outcomes of ``icesink_commits_total``.
COMMIT_OUTCOMES = ("committed", "failed")
#: Actions of ``icesink_orphan_files_total``.
ORPHAN_ACTIONS = ("deleted", "kept")
#: Kinds of ``icesink_schema_changes_total`` (the schema change objects' kinds).
SCHEMA_CHANGE_KINDS = ("add_column", "widen_type", "make_optional", "rename_column", "record_source_id")
#: Outcomes of ``icesink_schema_checks_total`` (:class:`icesink.schema.coordinator.SchemaCheck`).
SCHEMA_CHECK_OUTCOMES = ("unchanged", "refreshed", "evolved", "already_applied")
#: Reasons of ``icesink_dead_letter_reasons_total`` (:class:`icesink.schema.primitives.BadRecordReason`).
DEAD_LETTER_REASONS = (
    "parse_error",
    "out_of_range",
    "precision_loss",
    "type_mismatch",
    "null_in_required",
    "duplicate_key",
    "rename_conflict",
    "unroutable",
    "too_many_tables",
)

#: Reasons of ``icesink_source_records_skipped_total``: a Debezium tombstone, the null value
#: that follows each delete (the delete itself is an event of its own).
TOMBSTONE = "tombstone"
SKIP_REASONS = (TOMBSTONE,)

#: Buckets of the file size histograms, as fractions of the target file size.
FILE_SIZE_RATIOS = (1 / 64, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2)
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
_LOCK_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
_BATCH_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)

DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024


def file_size_buckets(target_bytes: int) -> tuple[float, ...]:
    """Histogram buckets around the target file size (1/64x ... 2x)."""
    return tuple(target_bytes * f for f in FILE_SIZE_RATIOS)


class MetricFamilies(MaintenanceFamilies, UpsertFamilies):
    """Every metric family of a sink, registered in one registry.

    Args:
        registry: Registry to register in.
        target_file_size_bytes: Centre of the file size histogram's buckets.
        table_limit: Bounds the ``table`` label of every family (a default limit when
            not given).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        target_file_size_bytes: int,
        table_limit: TableLabelLimit | None = None,
    ) -> None:
        self.registry = registry
        self.target_file_size_bytes = target_file_size_bytes
        self.table_limit = table_limit or TableLabelLimit()
        self._define_write_metrics()
        self._define_file_metrics()
        self._define_commit_metrics()
        self._define_state_metrics()
        self._define_schema_metrics()
        self._define_progress_metrics()
        self._define_upsert_metrics()
        self._define_maintenance_metrics()
        for family in vars(self).values():
            if isinstance(family, BoundedCounter | BoundedGauge | BoundedHistogram):
                family.table_limit = self.table_limit

    def _define_write_metrics(self) -> None:
        r = self.registry
        self.rows_written = BoundedCounter(
            "icesink_rows_written_total", "Rows committed to the table", ["table", "sink_id"], registry=r
        )
        self.dead_letter_rows = BoundedCounter(
            "icesink_dead_letter_rows_total",
            "Rows sent to the dead-letter table instead of the table",
            ["table", "sink_id"],
            registry=r,
        )
        self.dead_letter_reasons = BoundedCounter(
            "icesink_dead_letter_reasons_total",
            "Rows sent to the dead-letter table, by reason (parse_error, out_of_range, ...)",
            ["table", "reason"],
            registry=r,
        )
        self.bytes_written = BoundedCounter(
            "icesink_bytes_written_total", "Data file bytes committed", ["table", "sink_id"], registry=r
        )
        self.files_written = BoundedCounter(
            "icesink_files_written_total", "Data files committed", ["table", "sink_id"], registry=r
        )

    def _define_file_metrics(self) -> None:
        r = self.registry
        self.file_size = BoundedHistogram(
            "icesink_data_file_size_bytes",
            "Size of written data files",
            ["table"],
            buckets=file_size_buckets(self.target_file_size_bytes),
            registry=r,
        )
        self.file_size_ratio = BoundedHistogram(
            "icesink_data_file_size_ratio",
            "Size of written data files as a fraction of the target file size",
            ["table"],
            buckets=FILE_SIZE_RATIOS,
            registry=r,
        )
        self.target_file_size = BoundedGauge(
            "icesink_target_file_size_bytes", "Target size of data files", ["table"], registry=r
        )
        self.step_seconds = BoundedHistogram(
            "icesink_step_duration_seconds",
            "Duration of each step of a micro-batch",
            ["table", "step"],
            buckets=_STEP_BUCKETS,
            registry=r,
        )
        self.open_writers = BoundedGauge(
            "icesink_open_writers_max",
            "Most partition writers one task held open in the last batch",
            ["table"],
            registry=r,
        )
        self.buffered_bytes = BoundedGauge(
            "icesink_buffered_bytes_max",
            "Most bytes one task's writers buffered in the last batch",
            ["table"],
            registry=r,
        )
        self.task_peak_rss = BoundedGauge(
            "icesink_task_peak_rss_bytes",
            "Highest resident memory of a Python worker during a write task of the last batch",
            ["table"],
            registry=r,
        )
        self.task_seconds = BoundedGauge(
            "icesink_write_task_seconds_max",
            "Longest a write task of the last batch spent receiving its rows (phase=input) "
            "and finishing its files after them (phase=close)",
            ["table", "phase"],
            registry=r,
        )

    def _define_commit_metrics(self) -> None:
        r = self.registry
        self.batches = BoundedCounter(
            "icesink_batches_total",
            "Micro-batches handled, by outcome",
            ["table", "sink_id", "outcome"],
            registry=r,
        )
        self.replays_skipped = BoundedCounter(
            "icesink_replays_skipped_total",
            "Replayed batches found already committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.commits = BoundedCounter(
            "icesink_commits_total", "Commits by outcome", ["table", "sink_id", "outcome"], registry=r
        )
        self.commit_attempts = BoundedCounter(
            "icesink_commit_attempts_total", "Commit attempts", ["table", "sink_id"], registry=r
        )
        self.commit_conflicts = BoundedCounter(
            "icesink_commit_conflicts_total",
            "Commit attempts lost to concurrent writers",
            ["table", "sink_id"],
            registry=r,
        )
        self.orphan_files = BoundedCounter(
            "icesink_orphan_files_total",
            "Files of crashed attempts found at recovery, by action",
            ["table", "action"],
            registry=r,
        )

    def _define_state_metrics(self) -> None:
        r = self.registry
        self.staged_bytes = BoundedGauge(
            "icesink_staged_bytes",
            "Bytes of data files written and staged but not yet committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.staged_files = BoundedGauge(
            "icesink_staged_files",
            "Data files written and staged but not yet committed",
            ["table", "sink_id"],
            registry=r,
        )
        self.last_batch_id = BoundedGauge(
            "icesink_last_committed_batch_id",
            "Last committed micro-batch id",
            ["table", "sink_id"],
            registry=r,
        )
        self.last_commit_time = BoundedGauge(
            "icesink_last_commit_timestamp_seconds",
            "Unix time of the last successful commit",
            ["table", "sink_id"],
            registry=r,
        )
        self.start_time = BoundedGauge(
            "icesink_sink_start_timestamp_seconds",
            "Unix time at which this process started writing as the sink",
            ["table", "sink_id"],
            registry=r,
        )

    def _define_schema_metrics(self) -> None:
        r = self.registry
        self.schema_changes = BoundedCounter(
            "icesink_schema_changes_total",
            "Schema changes applied to the table, by kind",
            ["table", "kind"],
            registry=r,
        )
        self.schema_lock_wait = BoundedHistogram(
            "icesink_schema_lock_wait_seconds",
            "Time spent waiting for the table's schema lock",
            ["table"],
            buckets=_LOCK_WAIT_BUCKETS,
            registry=r,
        )
        self.schema_lock_acquisitions = BoundedCounter(
            "icesink_schema_lock_acquisitions_total",
            "Times the table's schema lock was taken",
            ["table"],
            registry=r,
        )
        self.schema_checks = BoundedCounter(
            "icesink_schema_checks_total",
            "Batch schemas compared with the table's, by outcome (only 'evolved' and "
            "'already_applied' took the lock)",
            ["table", "outcome"],
            registry=r,
        )
        self.schema_commit_conflicts = BoundedCounter(
            "icesink_schema_commit_conflicts_total",
            "Schema commits lost to a concurrent writer and retried after a refresh",
            ["table"],
            registry=r,
        )

    def _define_progress_metrics(self) -> None:
        r = self.registry
        self.input_rows = BoundedCounter(
            "icesink_input_rows_total",
            "Rows read by the streaming query (its progress reports)",
            ["table", "sink_id"],
            registry=r,
        )
        self.input_rows_per_second = BoundedGauge(
            "icesink_input_rows_per_second",
            "Rate at which rows arrived, over the last micro-batch",
            ["table", "sink_id"],
            registry=r,
        )
        self.processed_rows_per_second = BoundedGauge(
            "icesink_processed_rows_per_second",
            "Rate at which rows were processed, over the last micro-batch",
            ["table", "sink_id"],
            registry=r,
        )
        self.batch_seconds = BoundedHistogram(
            "icesink_batch_duration_seconds",
            "Duration of whole micro-batches (Spark's batchDuration)",
            ["table", "sink_id"],
            buckets=_BATCH_BUCKETS,
            registry=r,
        )
        self.source_records_skipped = BoundedCounter(
            "icesink_source_records_skipped_total",
            "Source records that are neither rows nor dead letters by design, by reason "
            "(tombstone: the null value Debezium sends after each delete)",
            ["table", "reason"],
            registry=r,
        )
        self.offsets_behind_latest = BoundedGauge(
            "icesink_source_offsets_behind_latest",
            "Kafka offsets between the end of the last micro-batch and the latest offsets, "
            "summed over partitions (where the source reports them); NaN once the source failed",
            ["table", "sink_id"],
            registry=r,
        )
        self.source_connected = BoundedGauge(
            "icesink_source_connected",
            "1 while the query's source answers (each progress or idle report), 0 once the query "
            "failed for want of its brokers (the Kafka job's ICESINK-KAFKA-SOURCE)",
            ["table", "sink_id"],
            registry=r,
        )
