"""librdkafka's log lines, through Python's logging, each kind at most once per interval.

Left to itself, librdkafka prints a line for every failed connection attempt: with no
broker at its address, about 17 lines a second per client, so the error that ends the
query comes after hundreds of ``Connection refused`` lines. Given as a client's
``logger``, a :class:`ClientLog` passes each kind of line (the client and librdkafka's
facility, such as ``FAIL``) on to the ``icesink.jobs.kafka.source.client`` logger at
most once per :data:`REPEAT_INTERVAL_S`, saying how many like it were held back.

librdkafka hands a client's log lines over when the client is polled: consumers are
polled as they read; the admin client is polled after each request
(:class:`~icesink.jobs.kafka.source.kafka_offset_reader.KafkaOffsetReader`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

REPEAT_INTERVAL_S = 30.0
"""How often a kind of line (client and facility) is logged at most."""

client_logger = logging.getLogger("icesink.jobs.kafka.source.client")


class ClientLog:
    """A librdkafka ``logger`` that logs each kind of line at most once per ``interval_s``.

    Args:
        interval_s: The least time between two lines of one kind.
        clock: The monotonic clock (seconds).
    """

    def __init__(self, interval_s: float = REPEAT_INTERVAL_S, clock: Any = time.monotonic) -> None:
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[tuple[str, ...], float] = {}
        self._held: dict[tuple[str, ...], int] = {}

    def log(self, level: int, msg: str, *args: Any) -> None:
        """One librdkafka line (confluent-kafka calls ``log(level, "%s [%s] %s", fac, name, text)``)."""
        kind = tuple(str(a) for a in args[:2]) if len(args) >= 2 else (msg,)
        now = self._clock()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_s:
                self._held[kind] = self._held.get(kind, 0) + 1
                return
            self._last[kind] = now
            held = self._held.pop(kind, 0)
        text = msg % args if args else msg
        if held:
            text += f" ({held} more like it since the last one shown)"
        client_logger.log(level, "%s", text)
