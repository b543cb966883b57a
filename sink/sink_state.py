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

_QUERY_ID_PROPERTY = "sql.streaming.queryId"


@dataclass
class SinkState:
    """What the sink keeps per sink id: its staged batches, and a lock for its batches."""

    sink_id: str
    query_id: str | None
    staging: StagingArea
    lock: threading.RLock = field(default_factory=threading.RLock)
    routing: RoutingHistory = field(default_factory=RoutingHistory)


def query_id_of(batch_df: DataFrame) -> str | None:
    """The id of the streaming query that produced ``batch_df`` (``None`` outside a query)."""
    return batch_df.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)


def sink_id_of(batch_df: DataFrame, configured: str | None) -> str:
    """The configured sink id, else the streaming query's id.

    Raises:
        ConfigError: Neither is known (the sink was called outside a streaming query).
    """
    if configured:
        return configured
    query_id = query_id_of(batch_df)
    if not query_id:
        raise ConfigError(
            "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
            hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
        )
    return query_id
