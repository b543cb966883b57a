"""icesink: exactly-once Apache Iceberg writes from Spark Structured Streaming.

The public API. Use::

    from icesink import IcebergSink
    sink = IcebergSink.from_options({"table": "db.events", "catalog.type": "sql", ...})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()

The implementation lives in the :mod:`sink` package (one subpackage per step of a
micro-batch); only the names below are public. They are imported on first use: Spark's
Python workers import only the executor modules (``sink.write``), not the driver's
catalog, commit and metrics code.

Beside the sink, its configuration, errors, metrics and maintenance, what a job around
the sink needs (the jobs in ``streaming_jobs/`` use nothing else, with
:mod:`icesink.sources` for a source that makes its rows in Python):

- :class:`DeadLetterQueue`, :class:`DeadLetterOutcome`: rows the job rejects before the
  sink sees them (undecodable input) go to the sink's dead-letter table, exactly once,
  under the :class:`BatchKey` (sink id, batch id, attempt) the job gives them.
- :class:`SinkIdentity`: the ``table`` and ``sink_id`` labels under which the job records
  its own figures in :class:`SinkMetrics` (a source that lost its brokers, say).
- :func:`route_label`: what names a routed sink (``route.by``) where no single table does,
  for the job's logs and metrics.
- :func:`load_table`, :func:`ensure_namespace`: the catalog's table (``None`` when there
  is none yet) and a namespace created safely against a concurrent writer, on the sink's
  own ``catalog``.
- :func:`hidden`: a sink option's value masked as the sink masks it (credentials), for a
  job that shows its configuration.
- :func:`executor_environment`: the Spark settings a job's own SparkSession gives the
  executors, so that the write tasks allocate from the memory pool they are sized for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sink.batch.dead_letters import DeadLetterOutcome, DeadLetterQueue
    from sink.batch.key import BatchKey
    from sink.catalog import ensure_namespace, load_table
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
    from sink.config_route import RouteBy, RouteConfig, route_label
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
        SinkIdentity,
        SinkMetrics,
    )
    from sink.secrets import hidden
    from sink.sink import (
        IcebergSink,
    )
    from sink.write.allocator import executor_environment

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
    "route_label": "sink.config_route",
    "load_table": "sink.catalog",
    "ensure_namespace": "sink.catalog",
    "DeadLetterQueue": "sink.batch.dead_letters",
    "DeadLetterOutcome": "sink.batch.dead_letters",
    "BatchKey": "sink.batch.key",
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
    "SinkIdentity": "sink.metrics",
    "hidden": "sink.secrets",
    "IcebergSink": "sink.sink",
    "executor_environment": "sink.write.allocator",
}
__all__ = [
    "BadRecordError",
    "BadRecordPolicy",
    "BatchKey",
    "CatalogConfig",
    "CatalogError",
    "CommitConfig",
    "CommitConflictError",
    "CommitError",
    "CompactionReport",
    "ConfigError",
    "DeadLetterConfig",
    "DeadLetterOutcome",
    "DeadLetterQueue",
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
    "SinkIdentity",
    "SinkMetrics",
    "WorkerPythonError",
    "WriteConfig",
    "WriteError",
    "compact",
    "ensure_namespace",
    "executor_environment",
    "expire_snapshots",
    "hidden",
    "load_table",
    "remove_orphan_files",
    "route_label",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'icesink' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
