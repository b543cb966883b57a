"""Which attempt of which batch of which sink: the identity every file and record of a batch carries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame

from sink.errors import ConfigError
from sink.spark_session import is_connect, query_id_of

__all__ = ["BatchKey", "new_attempt_id", "sink_id_of"]


def new_attempt_id() -> str:
    """A fresh attempt id: 16 hex digits, part of every file name the attempt writes."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class BatchKey:
    """One attempt of one micro-batch of one sink.

    Attributes:
        sink_id: The sink's identity in every table's ledger (the query id unless ``sink-id`` is set).
        batch_id: The micro-batch.
        attempt: This attempt's id: a batch replayed by Spark is written again as a new attempt,
            so two attempts' files never share a name.
    """

    sink_id: str
    batch_id: int
    attempt: str

    @classmethod
    def new(cls, sink_id: str, batch_id: int, attempt: str | None = None) -> BatchKey:
        """The key of a new attempt (``attempt``: one planned before the batch, e.g. by its source)."""
        return cls(sink_id, batch_id, attempt or new_attempt_id())

    @property
    def batch_prefix(self) -> str:
        """What the names of every attempt's files of this batch start with."""
        return f"{self.sink_id.replace('-', '')[:12]}-b{self.batch_id}"

    @property
    def file_prefix(self) -> str:
        """What the names of this attempt's files start with (and its folder is called)."""
        return f"{self.batch_prefix}-{self.attempt}"


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
