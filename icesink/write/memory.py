"""Peak resident memory of a write task, measured inside the Python worker."""

from __future__ import annotations

import os
import resource
import threading
from types import TracebackType

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_SAMPLE_INTERVAL_S = 0.02


def current_rss_bytes() -> int:
    """This process's resident set size now (Linux ``/proc``; else the lifetime peak)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE_SIZE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakRssSampler:
    """Samples RSS in a daemon thread while a task runs; ``peak_bytes`` is the highest seen.

    Python workers are reused across tasks, so the process's lifetime peak would mix
    tasks; sampling from the task's start measures this task alone.
    """

    def __init__(self, interval_s: float = _SAMPLE_INTERVAL_S) -> None:
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="icesink-rss-sampler", daemon=True)
        self.peak_bytes = 0

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def sample(self) -> None:
        """Take one sample now."""
        self.peak_bytes = max(self.peak_bytes, current_rss_bytes())

    def __enter__(self) -> PeakRssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
