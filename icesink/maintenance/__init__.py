"""Table maintenance: the operations (:mod:`icesink.maintenance.operations`) anyone may run, and the
sink's own schedule of them after its commits (:mod:`icesink.maintenance.scheduler`)."""

from icesink.maintenance.operations import (
    DEFAULT_ORPHAN_AGE,
    CompactionReport,
    MaintenanceReport,
    compact,
    expire_snapshots,
    partitions_to_compact,
    referenced_files,
    remove_orphan_files,
)

__all__ = [
    "DEFAULT_ORPHAN_AGE",
    "CompactionReport",
    "MaintenanceReport",
    "compact",
    "expire_snapshots",
    "partitions_to_compact",
    "referenced_files",
    "remove_orphan_files",
]
