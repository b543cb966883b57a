"""Spark's own time of a stream's micro-batches, from its query progress events."""

from __future__ import annotations

import time
from typing import Any


class BatchTimes:
    """Spark's own time of each micro-batch (``triggerExecution``), from the query progress events.

    A run's wall-clock time also holds the query's start (the Python source's planning
    process, the first offsets) and end; the micro-batches' time is what a stream that
    runs for days spends per message. Register once per session with :meth:`listen`.
    """

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def listen(self, spark: Any) -> BatchTimes:
        from pyspark.sql.streaming import StreamingQueryListener

        times = self

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                times.seconds.append(event.progress.durationMs.get("triggerExecution", 0) / 1000)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        spark.streams.addListener(_Listener())
        return self

    def take(self, wait_s: float = 5.0) -> float:
        """The seconds of the micro-batches since the last call (events arrive asynchronously)."""
        deadline = time.monotonic() + wait_s
        while not self.seconds and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # the last batch's event follows the query's end
        taken, self.seconds = sum(self.seconds), []
        return taken
