"""One ``StreamingQueryListener`` per Spark session, shared by every sink of the process.

Spark calls a Python listener through the Py4J callback server, one call per listener per
event, on the listener bus's single thread; each call costs tens of milliseconds (the event
is rebuilt in Python for each listener). A listener per sink made the cost grow with the
sinks a process ever created: with hundreds of them, a query's events, its end among them
(which commits its staged batches), arrived minutes late.
So each session gets one :class:`SessionListener`, and the sinks subscribe handlers to it:
one callback per event, whatever the number of sinks. The listener holds its handlers
weakly, so a sink that is dropped without ``close()`` stops being called and is collected.

A listener must be on the session that started the query: the session handed to
``foreachBatch`` is a clone whose listeners never hear of any query
(:func:`~icesink.spark_session.query_session` finds the right one).
"""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any, Protocol

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from icesink.spark_session import is_stopped, session_key

logger = logging.getLogger(__name__)


class QueryEventHandler(Protocol):
    """What a sink does on a query's events (each method returns quickly or hands work off)."""

    def on_progress(self, event: Any) -> None:
        """A micro-batch's progress report (``event.progress``)."""

    def on_idle(self, query_id: str) -> None:
        """The query found nothing new (its source answered)."""

    def on_terminated(self, query_id: str) -> None:
        """The query stopped."""


class SessionListener(StreamingQueryListener):
    """The one listener of a session: hands each event to the live handlers subscribed."""

    def __init__(self) -> None:
        self._handlers: weakref.WeakSet[QueryEventHandler] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, handler: QueryEventHandler) -> None:
        with self._lock:
            self._handlers.add(handler)

    def discard(self, handler: QueryEventHandler) -> None:
        with self._lock:
            self._handlers.discard(handler)

    def __len__(self) -> int:
        with self._lock:
            return len(self._handlers)

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        self._each("on_progress", event)

    def onQueryIdle(self, event: Any) -> None:
        self._each("on_idle", str(event.id))

    def onQueryTerminated(self, event: Any) -> None:
        self._each("on_terminated", str(event.id))

    def _each(self, method: str, argument: Any) -> None:
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            try:
                getattr(handler, method)(argument)
            except Exception:  # one sink's failure must not reach the others or the listener bus
                logger.exception("a sink's %s handler failed", method)


_lock = threading.Lock()
_listeners: dict[str, tuple[SparkSession, SessionListener]] = {}
"""The listener added to each session, by the session's JVM identity."""


def subscribe(spark: SparkSession, handler: QueryEventHandler) -> None:
    """Call ``handler`` on the events of ``spark``'s queries while it lives (idempotent).

    The caller keeps ``handler`` alive: the session's listener holds it weakly.
    """
    key = session_key(spark)
    with _lock:
        for stopped in [k for k, (session, _) in _listeners.items() if is_stopped(session)]:
            del _listeners[stopped]  # its listener bus is gone; a new session gets a new listener
        added = _listeners.get(key)
        if added is None:
            added = _listeners[key] = (spark, SessionListener())
            spark.streams.addListener(added[1])
            logger.info("query events of session %s delivered to icesink's sinks", key)
    added[1].add(handler)


def unsubscribe(spark: SparkSession, handler: QueryEventHandler) -> None:
    """Stop calling ``handler`` on ``spark``'s events (no-op when it was not subscribed)."""
    with _lock:
        added = _listeners.get(session_key(spark))
    if added is not None:
        added[1].discard(handler)


def listener_of(spark: SparkSession) -> SessionListener | None:
    """The session's one listener, if a sink subscribed to it."""
    with _lock:
        added = _listeners.get(session_key(spark))
    return None if added is None else added[1]
