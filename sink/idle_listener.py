"""Commit staged batches when a streaming query goes idle or stops (a chunk boundary)."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from sink.errors import SinkClosedError
from sink.spark_session import is_connect

logger = logging.getLogger(__name__)


class Flushable(Protocol):
    """What the listener flushes: a sink's staged batches of one query."""

    def flush(self, query_id: str | None = None) -> None: ...


class FlushOnIdle(StreamingQueryListener):
    """Commits a query's staged batches when it goes idle or terminates (a chunk boundary)."""

    def __init__(self, sink: Flushable) -> None:
        self._sink = sink

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        pass

    def onQueryIdle(self, event: Any) -> None:
        self._flush(str(event.id))

    def onQueryTerminated(self, event: Any) -> None:
        self._flush(str(event.id))

    def _flush(self, query_id: str) -> None:
        try:
            self._sink.flush(query_id)
        except SinkClosedError:  # an event queued before close() removed the listener
            return
        except Exception:  # a listener must not kill the listener bus; the next batch retries
            logger.exception("flushing staged batches of query %s failed", query_id)


def listen_for_idle(
    sink: Flushable, listening: set[int], lock: threading.Lock
) -> tuple[SparkSession, FlushOnIdle] | None:
    """Flush ``sink``'s staged batches when a query goes idle or stops (once per session).

    Registered on the active session: the session handed to ``foreachBatch`` is a
    clone whose listeners never hear of any query. ``listening`` holds the ids of the
    sessions ``sink`` already listens on, guarded by ``lock``.

    Returns:
        The session and the listener added to it (``None`` when there was nothing to add),
        for :func:`stop_listening`.
    """
    spark = SparkSession.getActiveSession()
    if spark is None or is_connect(spark):  # a Connect listener would run a copy of the sink elsewhere
        return None
    with lock:
        if id(spark) in listening:
            return None
        listening.add(id(spark))
    listener = FlushOnIdle(sink)
    spark.streams.addListener(listener)
    return spark, listener


def stop_listening(listeners: list[tuple[SparkSession, FlushOnIdle]]) -> None:
    """Remove ``listeners`` from their sessions (those still running)."""
    for spark, listener in listeners:
        with contextlib.suppress(Exception):  # a stopped session has no listener bus left
            spark.streams.removeListener(listener)
    listeners.clear()
