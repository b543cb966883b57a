"""Arrow's memory pool in the processes that run write tasks: jemalloc where pyarrow has it.

A write task copies its rows a few times (the received batches merged into chunks, each
chunk sorted by partition value, each file's pieces merged before it is encoded), and
frees each copy soon after. pyarrow's default pool on Linux, mimalloc, gives the freed
memory back to the system at once, and the next copy faults it in again: system CPU
time that jemalloc, which keeps freed memory for the next allocation, does not spend
(``benchmarks/README.md``, "Arrow's allocator in the write tasks").

Two ways to get it, the first better:

* :func:`executor_environment`: Spark settings that start the Python workers with
  jemalloc as the default pool of the whole process (``ARROW_DEFAULT_MEMORY_POOL``), so
  that every allocation comes from it. The project's jobs set it; a user's own session
  adds it to its configuration.
* :func:`use_write_pool`: each write task makes jemalloc pyarrow's default pool of its
  worker, when the worker was started without a choice. Arrow's C++ code that takes the
  process's pool directly (the Parquet writer's encoders, whose properties pyarrow gives
  no pool) keeps mimalloc then: two allocators keep free memory, and a worker's peak is
  higher than with the setting above, though its CPU time is as low.

Either way the pool is the worker's: other Arrow functions that the worker runs use it
too. A worker started with ``ARROW_DEFAULT_MEMORY_POOL`` set keeps the pool it names.
"""

from __future__ import annotations

import functools
import logging
import os

import pyarrow as pa

__all__ = ["POOL_ENV", "WRITE_POOL", "executor_environment", "use_write_pool"]

logger = logging.getLogger(__name__)

#: Arrow's own setting of the default pool; when set, the sink leaves the pool alone.
POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
#: The write tasks' pool: less CPU time than mimalloc, and a lower peak from the worker's start.
WRITE_POOL = "jemalloc"


def executor_environment() -> dict[str, str]:
    """Spark settings that start the executors' Python workers with :data:`WRITE_POOL`.

    Empty when this process's environment already names a pool (a local application's
    workers inherit it), or pyarrow has no jemalloc.
    """
    if os.environ.get(POOL_ENV) or not _has_jemalloc():
        return {}
    return {f"spark.executorEnv.{POOL_ENV}": WRITE_POOL}


@functools.cache
def use_write_pool() -> None:
    """Make jemalloc this process's default Arrow pool, unless its environment names one.

    Called at the start of each write task, before its first rows are read; only the
    first call in a process does anything, so a later change by anyone else is kept.
    """
    if os.environ.get(POOL_ENV):
        return
    if not _has_jemalloc():
        logger.info("pyarrow has no jemalloc; the write tasks use Arrow's default pool")
        return
    pa.set_memory_pool(pa.jemalloc_memory_pool())


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:  # this pyarrow was built without it
        return False
    return True
