"""The write's heavy modules, imported in the background while a task's first rows arrive.

A new Spark Python worker imports what writing files needs (pyiceberg's Arrow file IO,
and with it ``pyarrow.dataset`` and pandas: over half a second) at its first task with
rows, not when the task's function is unpickled (:mod:`icesink.write.table_files` builds
everything lazily), so a task without rows never pays for it. Started at the first rows,
the import runs on a thread of its own while the task goes on reading its input; the
writer's own import of the same module then waits only for what is left of it (Python's
per-module import lock makes the two one import).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from collections.abc import Iterator

import pyarrow as pa

__all__ = ["MODULES", "preload", "preloading"]

logger = logging.getLogger(__name__)

#: What a task's first data file needs.
MODULES: tuple[str, ...] = ("pyiceberg.io.pyarrow",)

_started = threading.Event()
_lock = threading.Lock()


def preload() -> bool:
    """Start importing :data:`MODULES` on a daemon thread, once per process.

    Returns:
        Whether this call started it (not when it was started before, or every module
        is already loaded).
    """
    with _lock:
        if _started.is_set() or all(m in sys.modules for m in MODULES):
            return False
        _started.set()
    threading.Thread(target=_import_all, name="icesink-preload", daemon=True).start()
    return True


def _import_all() -> None:
    for module in MODULES:
        try:
            importlib.import_module(module)
        except Exception as e:  # the writer's own import raises it again, where it is handled
            logger.warning("preloading %s failed: %s", module, e)
            return


def preloading(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` as they are, calling :func:`preload` at the first one with rows."""
    for batch in batches:
        if batch.num_rows:
            preload()
            yield batch
            yield from batches
            return
        yield batch
