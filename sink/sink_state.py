"""What the sink keeps per sink id, and where a sink id comes from.

A sink id is the streaming query's id unless ``sink-id`` is set; each has its own
staged batches (:class:`~sink.commit.staging.StagingArea`), routing history and lock,
created on the first batch of that sink id in this process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

from sink.commit.staging import StagingArea
from sink.errors import ConfigError
from sink.route.skew import RoutingHistory
from sink.spark_session import is_connect, query_id_of

__all__ = ["SinkState", "query_id_of", "sink_id_of"]


@dataclass
class SinkState:
    """What the sink keeps per sink id: its staged batches, and a lock for its batches."""

    sink_id: str
    query_id: str | None
    staging: StagingArea
    lock: threading.RLock = field(default_factory=threading.RLock)
    routing: RoutingHistory = field(default_factory=RoutingHistory)


def sink_id_of(batch_df: DataFrame, configured: str | None) -> str:
    """The configured sink id, else the streaming query's id.

    Raises:
        ConfigError: Neither is known (the sink was called outside a streaming query, or
            through Spark Connect, which does not tell the query's id).
    """
    if configured:
        return configured
    if is_connect(batch_df.sparkSession):
        raise ConfigError(
            "no sink id: under Spark Connect the sink cannot learn the streaming query's id "
            "and 'sink-id' is not set",
            hint="set the 'sink-id' option to a name unique to the query and stable across its "
            "restarts (e.g. 'orders-ingest')",
        )
    query_id = query_id_of(batch_df)
    if not query_id:
        raise ConfigError(
            "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
            hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
        )
    return query_id
