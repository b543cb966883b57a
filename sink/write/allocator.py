"""Arrow's memory pool in the processes that run write tasks: jemalloc where pyarrow has it.

A write task copies its rows a few times (the received batches merged into chunks, each
chunk sorted by partition value, each file's pieces merged before it is encoded), and
frees each copy soon after. pyarrow's default pool on Linux, mimalloc, gives the freed
memory back to the system at once, so the next copy faults it in again: in a Spark
Python worker writing 1,000,000 rows, 0.2-1.3 s of system CPU time per task, varying
from batch to batch, against 0.25-0.45 s with jemalloc, and a lower peak (figures and
commands in ``benchmarks/README.md``, "Arrow's allocator in the write tasks").

The pool is the process's: the tasks of other Arrow functions that a Spark Python worker
runs after the sink's use it too. Set ``ARROW_DEFAULT_MEMORY_POOL`` in the executors'
environment (``spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL``) to keep a pool of your
choice; a pyarrow built without jemalloc keeps its default.
"""

from __future__ import annotations

import functools
import logging
import os

import pyarrow as pa

__all__ = ["POOL_ENV", "use_write_pool"]

logger = logging.getLogger(__name__)

#: Arrow's own setting of the default pool; when set, the sink leaves the pool alone.
POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"


def use_write_pool() -> str:
    """Make jemalloc this process's default Arrow pool, once; the pool's name.

    Called at the start of each write task, before its first rows are read. Only the
    first call in a process chooses: a later change by anyone else is kept.
    """
    _choose_once()
    return str(pa.default_memory_pool().backend_name)


@functools.cache
def _choose_once() -> None:
    if os.environ.get(POOL_ENV):
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # this pyarrow was built without jemalloc
        logger.info("pyarrow has no jemalloc; the write tasks use Arrow's default pool")
