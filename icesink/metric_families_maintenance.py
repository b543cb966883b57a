"""The metric families of the sink's table maintenance (:mod:`icesink.maintenance.scheduler`).

A part of :class:`~icesink.metric_families.MetricFamilies`, kept apart so each module holds one
group of families; :class:`~icesink.metrics.SinkMetrics` records into them through
:meth:`MaintenanceFamilies.record_maintenance`.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry

from icesink.metric_labels import BoundedCounter, BoundedGauge, BoundedHistogram

#: Outcomes of ``icesink_maintenance_runs_total``: nothing left to do, work left for the next
#: batch (the budget was spent), a unit gave way to another commit, or it failed.
MAINTENANCE_OUTCOMES = ("done", "deferred", "conflict", "failed")
#: Actions of ``icesink_maintenance_files_total``.
MAINTENANCE_FILE_ACTIONS = (
    "rewritten",  # data files a compaction replaced
    "delete_removed",  # delete files a compaction dropped
    "written",  # data files a compaction wrote
    "delete_merged",  # delete files a merge replaced
    "delete_written",  # merged delete files written, by merges and by compactions
    "expired_deleted",  # files only expired snapshots reached, deleted
    "orphan_deleted",  # files no snapshot referenced, deleted
)
#: Kinds of ``icesink_maintenance_partitions_total``: partitions whose data files were rewritten,
#: partitions whose delete files were merged.
MAINTENANCE_PARTITION_KINDS = ("compacted", "merged")
_MAINTENANCE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class MaintenanceFamilies:
    """The maintenance families, defined by :meth:`_define_maintenance_metrics` in ``registry``."""

    registry: CollectorRegistry

    def _define_maintenance_metrics(self) -> None:
        r = self.registry
        self.maintenance_runs = BoundedCounter(
            "icesink_maintenance_runs_total",
            "Maintenance runs of a table after a batch, by outcome (done, deferred, conflict, failed)",
            ["table", "outcome"],
            registry=r,
        )
        self.maintenance_duration = BoundedHistogram(
            "icesink_maintenance_duration_seconds",
            "Time a table's maintenance took after a batch",
            ["table"],
            buckets=_MAINTENANCE_BUCKETS,
            registry=r,
        )
        self.maintenance_files = BoundedCounter(
            "icesink_maintenance_files_total",
            "Files maintenance rewrote, wrote or deleted, by action",
            ["table", "action"],
            registry=r,
        )
        self.maintenance_partitions = BoundedCounter(
            "icesink_maintenance_partitions_total",
            "Partitions maintenance worked on, by kind (compacted: data files rewritten; merged: delete "
            "files merged into one, no data file read)",
            ["table", "kind"],
            registry=r,
        )
        self.snapshots_expired = BoundedCounter(
            "icesink_snapshots_expired_total", "Snapshots expired by maintenance", ["table"], registry=r
        )
        self.maintenance_conflicts = BoundedCounter(
            "icesink_maintenance_conflicts_total",
            "Maintenance units that gave way to another commit (tried again after the next batch)",
            ["table"],
            registry=r,
        )
        self.live_delete_files = BoundedGauge(
            "icesink_live_delete_files",
            "Delete files in the table's current snapshot (every reader applies each)",
            ["table"],
            registry=r,
        )
        self.compaction_pending = BoundedGauge(
            "icesink_compaction_pending_partitions",
            "Partitions planned for compaction and not yet compacted",
            ["table"],
            registry=r,
        )

    def start_maintenance(self, table: str) -> None:
        """Create ``table``'s maintenance counters at zero and its time histogram (from the sink's
        start), so that a dashboard shows 0, not "no data", for what maintenance has not done yet."""
        for outcome in MAINTENANCE_OUTCOMES:
            self.maintenance_runs.labels(table, outcome).inc(0)
        for action in MAINTENANCE_FILE_ACTIONS:
            self.maintenance_files.labels(table, action).inc(0)
        for kind in MAINTENANCE_PARTITION_KINDS:
            self.maintenance_partitions.labels(table, kind).inc(0)
        self.snapshots_expired.labels(table).inc(0)
        self.maintenance_conflicts.labels(table).inc(0)
        self.maintenance_duration.labels(table)

    def record_maintenance(
        self,
        table: str,
        outcome: str,
        seconds: float,
        files: Mapping[str, int] | None = None,
        counts: Mapping[str, int] | None = None,
    ) -> None:
        """One maintenance run of ``table``: its outcome and time, the ``files`` per action, and
        ``counts`` of ``snapshots_expired``, ``conflicts``, ``delete_files`` (live), ``pending``, and
        of partitions ``compacted`` and ``merged``."""
        self.maintenance_runs.labels(table, outcome).inc()
        self.maintenance_duration.labels(table).observe(seconds)
        for action, n in (files or {}).items():
            if n:
                self.maintenance_files.labels(table, action).inc(n)
        counts = counts or {}
        if counts.get("snapshots_expired"):
            self.snapshots_expired.labels(table).inc(counts["snapshots_expired"])
        for kind in MAINTENANCE_PARTITION_KINDS:
            if counts.get(kind):
                self.maintenance_partitions.labels(table, kind).inc(counts[kind])
        if counts.get("conflicts"):
            self.maintenance_conflicts.labels(table).inc(counts["conflicts"])
        if "delete_files" in counts:
            self.live_delete_files.labels(table).set(counts["delete_files"])
        if "pending" in counts:
            self.compaction_pending.labels(table).set(counts["pending"])
