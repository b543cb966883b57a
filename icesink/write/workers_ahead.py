"""Spark's Python workers started, with the write task's imports, while a new query starts.

A new application's first micro-batch otherwise pays for them inside its write step:
Spark starts its Python worker daemon and a worker per task slot at its first Python
job, each worker imports the write task's modules when it unpickles the task's function,
and pyiceberg's Arrow file IO (:mod:`icesink.write.preload`) at its first rows. Spark keeps
its Python workers for later tasks (``spark.python.worker.reuse``, on by default), so
:func:`start_workers_ahead`, called when the sink is prepared, runs one small job on a
thread of its own, once per Spark application: a task per slot, each importing all of
that, while the query starts. A failure is only logged: the first batch then starts the
workers itself.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from icesink.spark_session import application_id, default_parallelism
from icesink.write.preload import MODULES as FIRST_FILE_MODULES

__all__ = ["start_workers_ahead"]

logger = logging.getLogger(__name__)

#: What a write task's worker imports: its function's modules, then what its first file needs.
TASK_MODULES: tuple[str, ...] = ("icesink.write.task", "icesink.write.routed_task", *FIRST_FILE_MODULES)

_started: set[str] = set()  # the applications whose workers were started here
_lock = threading.Lock()


def start_workers_ahead(spark: SparkSession) -> bool:
    """Start a Python worker per task slot of ``spark``'s application, each with the write
    task's imports, on a daemon thread; once per application.

    Returns:
        Whether this call started them (not when a call for the same application did before).
    """
    app = application_id(spark)
    with _lock:
        if app in _started:
            return False
        _started.add(app)
    tasks = default_parallelism(spark)
    thread = threading.Thread(target=_run, args=(spark, tasks), name="icesink-workers-ahead", daemon=True)
    thread.start()
    return True


def _run(spark: SparkSession, tasks: int) -> None:
    try:
        spark.range(0, tasks, 1, tasks).mapInArrow(_import_task_modules, "ready boolean").collect()
    except Exception as e:  # the first batch starts the workers, and reports what fails there
        logger.warning("starting Python workers before the first batch failed: %s", e)


def _import_task_modules(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Run in a Python worker: import :data:`TASK_MODULES`; a row ``ready`` per input row."""
    for module in TASK_MODULES:
        importlib.import_module(module)
    for batch in batches:
        yield pa.RecordBatch.from_arrays([pa.array([True] * batch.num_rows, pa.bool_())], ["ready"])
