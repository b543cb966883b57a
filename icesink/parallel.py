"""A few catalog and storage round trips at once: the per-table calls of a routed batch.

Each table's calls (load, settle, record the attempt, plan a lookup, commit) are
independent of the others', so a batch of hundreds of tables runs them on a small thread
pool instead of one after the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

CATALOG_THREADS = 4  # tables prepared, recorded or committed at once (catalog and storage round trips)
_T = TypeVar("_T")


def run_parallel(calls: Sequence[Callable[[], _T]]) -> list[_T]:
    """Run ``calls`` on a few threads (inline for one), results in order.

    Every call runs, whichever fail: then the first failed call's error (in the calls'
    order) is raised. A table's commit that fails does not keep the others from theirs,
    however the threads happened to be scheduled.
    """
    if len(calls) <= 1:
        return [call() for call in calls]
    with ThreadPoolExecutor(min(CATALOG_THREADS, len(calls)), thread_name_prefix="icesink-route") as pool:
        futures = [pool.submit(call) for call in calls]
    return [future.result() for future in futures]  # all have ended: the pool waited for them
