"""The per-table calls of a routed batch, run a few at a time (``icesink/parallel.py``)."""

from __future__ import annotations

import threading
import time

import pytest

from icesink.parallel import CATALOG_THREADS, run_parallel


def test_results_come_in_the_calls_order() -> None:
    def after(seconds: float, value: int) -> int:
        time.sleep(seconds)
        return value

    calls = [lambda i=i: after(0.01 * (5 - i), i) for i in range(6)]
    assert run_parallel(calls) == list(range(6))


def test_every_call_runs_when_one_fails_and_the_first_error_is_raised() -> None:
    # More calls than threads: when the first fails at once, the last ones still wait
    # for a thread. Each still runs (each table's commit is its own), then the error goes on.
    ran: list[int] = []
    lock = threading.Lock()

    def call(i: int) -> int:
        if i in (0, 3):
            time.sleep(0 if i == 0 else 0.1)
            raise RuntimeError(f"call {i} failed")
        time.sleep(0.2)
        with lock:
            ran.append(i)
        return i

    calls = [lambda i=i: call(i) for i in range(CATALOG_THREADS + 3)]
    with pytest.raises(RuntimeError, match="call 0 failed"):
        run_parallel(calls)
    assert sorted(ran) == [i for i in range(CATALOG_THREADS + 3) if i not in (0, 3)]
