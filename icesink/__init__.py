"""icesink: exactly-once Apache Iceberg writes from Spark Structured Streaming.

The public API. Use::

    from icesink import IcebergSink
    sink = IcebergSink.from_options({"table": "db.events", "catalog.type": "sql", ...})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()

The implementation lives in the subpackages of :mod:`icesink` (one per step of a
micro-batch; ``docs/architecture.md`` maps them); only the names below are public.
They are imported on first use: Spark's Python workers import only the executor modules
(``icesink.write``), not the driver's catalog, commit and metrics code
(:mod:`icesink._lazy`).

Beside the sink, its configuration, errors, metrics and maintenance, what a job around
the sink needs (the jobs in :mod:`icesink.jobs` use nothing else, with
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
- :data:`RENAMED_FROM`, :func:`with_renamed_from`, :data:`SOURCE_ID`: the Spark field metadata
  that says a batch field is a column of the table renamed (:mod:`icesink.schema.renames`), or
  gives the field an identity its column keeps (:mod:`icesink.schema.source_ids`), for a
  source whose schemas know renames (the Kafka job's Avro aliases and Protobuf field numbers).
- :func:`executor_environment`: the Spark settings a job's own SparkSession gives the
  executors, so that the write tasks allocate from the memory pool they are sized for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icesink._lazy import lazy_names

if TYPE_CHECKING:
    from icesink.batch.dead_letters import DeadLetterOutcome, DeadLetterQueue
    from icesink.batch.key import BatchKey
    from icesink.catalog import ensure_namespace, load_table
    from icesink.config import (
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
    from icesink.config_catalog import CatalogConfig
    from icesink.config_route import RouteBy, RouteConfig, route_label
    from icesink.errors import (
        BadRecordError,
        CatalogError,
        CommitConflictError,
        CommitError,
        ConfigError,
        PartitionSpecError,
        RenameConflictError,
        SchemaError,
        SelfCheckError,
        SinkClosedError,
        SinkError,
        WorkerPythonError,
        WriteError,
    )
    from icesink.maintenance import (
        CompactionReport,
        MaintenanceReport,
        compact,
        expire_snapshots,
        remove_orphan_files,
    )
    from icesink.metrics import (
        SinkIdentity,
        SinkMetrics,
    )
    from icesink.schema.renames import RENAMED_FROM, with_renamed_from
    from icesink.schema.source_ids import SOURCE_ID
    from icesink.secrets import hidden
    from icesink.sink import (
        IcebergSink,
    )
    from icesink.write.allocator import executor_environment

_EXPORTS = {
    "BadRecordPolicy": "icesink.config",
    "CatalogConfig": "icesink.config_catalog",
    "CommitConfig": "icesink.config",
    "DeadLetterConfig": "icesink.config",
    "DistributionMode": "icesink.config",
    "MetricsConfig": "icesink.config",
    "SchemaConfig": "icesink.config",
    "SchemaEvolution": "icesink.config",
    "SinkConfig": "icesink.config",
    "WriteConfig": "icesink.config",
    "RouteBy": "icesink.config_route",
    "RouteConfig": "icesink.config_route",
    "route_label": "icesink.config_route",
    "load_table": "icesink.catalog",
    "ensure_namespace": "icesink.catalog",
    "DeadLetterQueue": "icesink.batch.dead_letters",
    "DeadLetterOutcome": "icesink.batch.dead_letters",
    "BatchKey": "icesink.batch.key",
    "BadRecordError": "icesink.errors",
    "CatalogError": "icesink.errors",
    "CommitConflictError": "icesink.errors",
    "CommitError": "icesink.errors",
    "ConfigError": "icesink.errors",
    "PartitionSpecError": "icesink.errors",
    "SchemaError": "icesink.errors",
    "RenameConflictError": "icesink.errors",
    "RENAMED_FROM": "icesink.schema.renames",
    "with_renamed_from": "icesink.schema.renames",
    "SOURCE_ID": "icesink.schema.source_ids",
    "SelfCheckError": "icesink.errors",
    "SinkClosedError": "icesink.errors",
    "SinkError": "icesink.errors",
    "WorkerPythonError": "icesink.errors",
    "WriteError": "icesink.errors",
    "CompactionReport": "icesink.maintenance",
    "MaintenanceReport": "icesink.maintenance",
    "compact": "icesink.maintenance",
    "expire_snapshots": "icesink.maintenance",
    "remove_orphan_files": "icesink.maintenance",
    "SinkMetrics": "icesink.metrics",
    "SinkIdentity": "icesink.metrics",
    "hidden": "icesink.secrets",
    "IcebergSink": "icesink.sink",
    "executor_environment": "icesink.write.allocator",
}
__all__ = [
    "RENAMED_FROM",
    "SOURCE_ID",
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
    "RenameConflictError",
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
    "with_renamed_from",
]


__getattr__ = lazy_names(__name__, _EXPORTS)
