"""Commit staged batches when a streaming query goes idle or stops (a chunk boundary)."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession

from icesink.errors import SinkClosedError
from icesink.query_events import subscribe, unsubscribe
from icesink.spark_session import query_session, session_key

logger = logging.getLogger(__name__)


class Flushable(Protocol):
    """What the listener flushes: a sink's staged batches of one query."""

    def flush(self, query_id: str | None = None) -> None: ...


class FlushOnIdle:
    """Commits a query's staged batches when it goes idle or terminates (a chunk boundary)."""

    def __init__(self, sink: Flushable) -> None:
        self._sink = sink

    def on_progress(self, event: Any) -> None:
        pass

    def on_idle(self, query_id: str) -> None:
        self._flush(query_id)

    def on_terminated(self, query_id: str) -> None:
        self._flush(query_id)

    def _flush(self, query_id: str) -> None:
        try:
            self._sink.flush(query_id)
        except SinkClosedError:  # an event queued before close() unsubscribed
            return
        except Exception:  # a listener must not kill the listener bus; the next batch retries
            logger.exception("flushing staged batches of query %s failed", query_id)


class IdleListeners:
    """Flushes one sink's staged batches when its queries go idle or stop.

    Args:
        sink: The sink flushed.
    """

    def __init__(self, sink: Flushable) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, SparkSession] = {}  # the sessions listened on, by JVM identity
        self._handler = FlushOnIdle(sink)  # the session's listener holds it weakly

    def listen(self, batch_df: DataFrame) -> None:
        """Flush the sink's staged batches when ``batch_df``'s query goes idle or stops (once per session).

        Registered on the session that started the query
        (:func:`~icesink.spark_session.query_session`): the session handed to ``foreachBatch`` is
        a clone whose listeners never hear of any query. None under Spark Connect, where a
        listener would run a copy of the sink elsewhere.
        """
        spark = query_session(batch_df)
        if spark is None:
            return
        key = session_key(spark)
        with self._lock:
            if key in self._sessions:
                return
            self._sessions[key] = spark
        subscribe(spark, self._handler)

    def stop(self) -> None:
        """Stop listening on the sessions (those still running)."""
        with self._lock:
            added = list(self._sessions.values())
        for spark in added:
            with contextlib.suppress(Exception):  # a stopped session has no listener bus left
                unsubscribe(spark, self._handler)
