"""icesink: exactly-once Apache Iceberg writes from Spark Structured Streaming.

Use::

    from sink import IcebergSink
    sink = IcebergSink.from_options({"table": "db.events", "catalog.type": "sql", ...})
    df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()
"""

from __future__ import annotations

from sink.config import CatalogConfig, CommitConfig, DistributionMode, SinkConfig, WriteConfig
from sink.errors import SinkError
from sink.sink import IcebergSink

__all__ = [
    "CatalogConfig",
    "CommitConfig",
    "DistributionMode",
    "IcebergSink",
    "SinkConfig",
    "SinkError",
    "WriteConfig",
]
