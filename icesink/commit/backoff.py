"""The attempts of a commit that may lose races, with a backoff between them and none after the last."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from icesink.config import CommitConfig


@dataclass(frozen=True)
class Backoff:
    """The retry schedule of ``commit.retry.*``: the attempt numbers, with a wait before each retry.

    A loop ``for attempt_no in backoff.attempts():`` returns when an attempt succeeds and
    continues when the catalog refused it; the wait happens only when another attempt
    follows, so a loop that gives up does so right after its last attempt.

    Attributes:
        config: Number of retries and the bounds of the wait.
        sleep: Waits the given seconds (``time.sleep`` when ``None``).
    """

    config: CommitConfig
    sleep: Callable[[float], None] | None = None

    @property
    def tries(self) -> int:
        """Attempts in all: the first and the retries."""
        return self.config.retries + 1

    def attempts(self) -> Iterator[int]:
        """The attempt numbers 1 to :attr:`tries`, after waiting :meth:`wait_ms` before each retry."""
        for attempt_no in range(1, self.tries + 1):
            if attempt_no > 1:
                (self.sleep or time.sleep)(self.wait_ms(attempt_no - 1) / 1000)
            yield attempt_no

    def wait_ms(self, attempt_no: int) -> float:
        """The wait after attempt ``attempt_no`` was refused: exponential, capped, with jitter."""
        wait_ms = float(min(self.config.min_wait_ms * 2 ** (attempt_no - 1), self.config.max_wait_ms))
        return wait_ms + random.uniform(0, 0.1 * wait_ms)
