"""A stop asked for by SIGTERM or SIGINT: noted by the handler, acted on by the job's loops."""

from __future__ import annotations

import time
from types import FrameType

POLL_S = 2.0  # how often the loops look at the request


class StopRequest:
    """A signal handler that only notes the signal: the query is stopped from the main loop."""

    def __init__(self) -> None:
        self.requested: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = signum

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if a signal comes; whether one came."""
        deadline = time.monotonic() + seconds
        while self.requested is None and time.monotonic() < deadline:
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
        return self.requested is not None
