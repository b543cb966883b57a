"""The metric families of upserts: keys changed, delete files, and the key index.

A part of :class:`~icesink.metric_families.MetricFamilies`, kept apart so each module holds one
group of families; :class:`~icesink.metrics.SinkMetrics` records the key index's figures
through :meth:`UpsertFamilies.record_key_index`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from icesink.metric_labels import BoundedCounter
from icesink.upsert.key_index_update import IndexCounts


class UpsertFamilies:
    """The upsert families, defined by :meth:`_define_upsert_metrics` in ``registry``."""

    registry: CollectorRegistry

    def _define_upsert_metrics(self) -> None:
        r = self.registry
        self.upserted_keys = BoundedCounter(
            "icesink_upserted_keys_total",
            "Keys inserted or replaced by committed upsert batches",
            ["table", "sink_id"],
            registry=r,
        )
        self.deleted_keys = BoundedCounter(
            "icesink_deleted_keys_total",
            "Keys whose last change in a committed upsert batch was a delete",
            ["table", "sink_id"],
            registry=r,
        )
        self.delete_files = BoundedCounter(
            "icesink_delete_files_total",
            "Position delete files committed by upsert batches",
            ["table", "sink_id"],
            registry=r,
        )
        self.key_index_entries_read = BoundedCounter(
            "icesink_key_index_entries_read_total",
            "Key index entries read from the table's index files by upsert lookups (entries kept in "
            "memory since an earlier batch are not read again)",
            ["table", "sink_id"],
            registry=r,
        )
        self.key_index_rebuilds = BoundedCounter(
            "icesink_key_index_rebuilds_total",
            "Key indexes rebuilt from the data files (none yet, unreadable, or history lost)",
            ["table", "sink_id"],
            registry=r,
        )
        self.key_index_catchup_files = BoundedCounter(
            "icesink_key_index_catchup_files_total",
            "Data and delete files other commits added that the key index read to catch up",
            ["table", "sink_id"],
            registry=r,
        )

    def record_key_index(self, table: str, sink_id: str, counts: IndexCounts) -> None:
        """What a table's key index did for a batch."""
        self.key_index_entries_read.labels(table, sink_id).inc(counts.entries_read)
        self.key_index_rebuilds.labels(table, sink_id).inc(counts.rebuilds)
        self.key_index_catchup_files.labels(table, sink_id).inc(counts.catchup_files)
