"""Write tasks whose Python cannot import the sink: the error says which interpreter, and the fix.

Spark starts its Python workers with ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``),
``python3`` from the ``PATH`` when neither is set: not the driver's virtual environment,
so a worker fails to unpickle the write task's function with ``ModuleNotFoundError: No
module named 'icesink'`` (or ``'pyarrow'``), deep in a Python traceback inside a Java one.
:func:`worker_import_error` recognises that failure of a write job and makes it a
:class:`~icesink.errors.WorkerPythonError` naming the workers' interpreter setting, the
driver's interpreter and the fix.
"""

from __future__ import annotations

import os
import re
import sys

from pyspark.sql import DataFrame

from icesink.errors import WorkerPythonError

#: Modules a write task imports that a Python without icesink lacks (top-level names).
TASK_DEPENDENCIES = ("icesink", "pyarrow", "pyiceberg", "pydantic")
_MISSING = re.compile(r"No module named '([A-Za-z_][\w.]*)'")
_CONF = "spark.pyspark.python"


def worker_import_error(
    error: BaseException, df: DataFrame, table: str, batch_id: int
) -> WorkerPythonError | None:
    """The sink's error for a write job whose workers could not import the sink, else ``None``.

    Args:
        error: What the write job raised (a Python traceback of the worker inside).
        df: The DataFrame written (its session tells the workers' interpreter setting).
        table: The table (or routed sink's label) written.
        batch_id: The micro-batch.
    """
    match = _MISSING.search(str(error))
    if match is None or match.group(1).split(".")[0] not in TASK_DEPENDENCIES:
        return None
    setting = os.environ.get("PYSPARK_PYTHON")
    shown = f"PYSPARK_PYTHON={setting}" if setting else "PYSPARK_PYTHON not set (python3 from the PATH)"
    conf = _worker_conf(df)
    if conf:
        shown += f", {_CONF}={conf}"
    return WorkerPythonError(
        f"Spark's Python workers cannot import {match.group(1)!r}: they do not run the driver's "
        f"Python ({shown}; the driver runs {sys.executable})",
        table=table,
        batch_id=batch_id,
        hint=f"start the job with PYSPARK_PYTHON={sys.executable} (export it, or set "
        f"{_CONF}), or install icesink into the Python the workers run",
    )


def _worker_conf(df: DataFrame) -> str | None:
    try:
        value = df.sparkSession.conf.get(_CONF, None)
    except Exception:  # a session that cannot answer: the environment variable is named anyway
        return None
    return str(value) if value else None
