"""icesink: exactly-once Apache Iceberg writes from Spark Structured Streaming.

The public API. Use::

    from icesink import IcebergSink
    sink = IcebergSink.from_options({"table": "db.events", "catalog.type": "sql", ...})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()

The implementation lives in the :mod:`sink` package (one subpackage per step of a
micro-batch); only the names below are public. They are imported on first use: Spark's
Python workers import only the executor modules (``sink.write``), not the driver's
catalog, commit and metrics code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sink.config import (
        BadRecordPolicy,
        CommitConfig,
        DeadLetterConfig,
        DistributionMode,
        MetricsConfig,
        SchemaConfig,
        SchemaEvolution,
        SinkConfig,
        WriteConfig,
    )
    from sink.config_catalog import CatalogConfig
    from sink.config_route import RouteBy, RouteConfig
    from sink.errors import (
        BadRecordError,
        CatalogError,
        CommitConflictError,
        CommitError,
        ConfigError,
        PartitionSpecError,
        SchemaError,
        SelfCheckError,
        SinkClosedError,
        SinkError,
        WorkerPythonError,
        WriteError,
    )
    from sink.maintenance import (
        CompactionReport,
        MaintenanceReport,
        compact,
        expire_snapshots,
        remove_orphan_files,
    )
    from sink.metrics import (
        SinkMetrics,
    )
    from sink.sink import (
        IcebergSink,
    )

_EXPORTS = {
    "BadRecordPolicy": "sink.config",
    "CatalogConfig": "sink.config_catalog",
    "CommitConfig": "sink.config",
    "DeadLetterConfig": "sink.config",
    "DistributionMode": "sink.config",
    "MetricsConfig": "sink.config",
    "SchemaConfig": "sink.config",
    "SchemaEvolution": "sink.config",
    "SinkConfig": "sink.config",
    "WriteConfig": "sink.config",
    "RouteBy": "sink.config_route",
    "RouteConfig": "sink.config_route",
    "BadRecordError": "sink.errors",
    "CatalogError": "sink.errors",
    "CommitConflictError": "sink.errors",
    "CommitError": "sink.errors",
    "ConfigError": "sink.errors",
    "PartitionSpecError": "sink.errors",
    "SchemaError": "sink.errors",
    "SelfCheckError": "sink.errors",
    "SinkClosedError": "sink.errors",
    "SinkError": "sink.errors",
    "WorkerPythonError": "sink.errors",
    "WriteError": "sink.errors",
    "CompactionReport": "sink.maintenance",
    "MaintenanceReport": "sink.maintenance",
    "compact": "sink.maintenance",
    "expire_snapshots": "sink.maintenance",
    "remove_orphan_files": "sink.maintenance",
    "SinkMetrics": "sink.metrics",
    "IcebergSink": "sink.sink",
}
__all__ = [
    "BadRecordError",
    "BadRecordPolicy",
    "CatalogConfig",
    "CatalogError",
    "CommitConfig",
    "CommitConflictError",
    "CommitError",
    "CompactionReport",
    "ConfigError",
    "DeadLetterConfig",
    "DistributionMode",
    "IcebergSink",
    "MaintenanceReport",
    "MetricsConfig",
    "PartitionSpecError",
    "RouteBy",
    "RouteConfig",
    "SchemaConfig",
    "SchemaError",
    "SchemaEvolution",
    "SelfCheckError",
    "SinkClosedError",
    "SinkConfig",
    "SinkError",
    "SinkMetrics",
    "WorkerPythonError",
    "WriteConfig",
    "WriteError",
    "compact",
    "expire_snapshots",
    "remove_orphan_files",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'icesink' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
