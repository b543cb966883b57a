"""A new Spark application whose sink is prepared: what its Python workers have imported, before and after.

Reads ``workdir`` as JSON from standard input, starts a ``local[2]`` application, asks its
Python workers (a task per slot) which of the write task's modules they have imported and
which Arrow memory pool they started with, prepares a sink (which starts the workers
ahead, :mod:`icesink.write.workers_ahead`), waits for that to end, and asks again. Prints one
JSON line: ``before`` and ``after``, a row per task with its worker's process id, its
Arrow pool and whether it has each module.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from icesink.jobs.spark import get_spark

MODULES = ("icesink.write.task", "pyiceberg.io.pyarrow")
JOIN_TIMEOUT_S = 240.0


def ask_workers(spark: SparkSession) -> list[dict[str, Any]]:
    """A row per task: its worker's process id, Arrow pool and, per module of :data:`MODULES`,
    whether it is imported."""

    def imported(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import os

        found = [name in sys.modules for name in MODULES]
        for batch in batches:
            n = batch.num_rows
            pool = pa.default_memory_pool().backend_name
            columns = [pa.array([os.getpid()] * n, pa.int64()), pa.array([pool] * n, pa.string())]
            columns += [pa.array([f] * n, pa.bool_()) for f in found]
            names = ["pid", "pool", *(m.replace(".", "_") for m in MODULES)]
            yield pa.RecordBatch.from_arrays(columns, names)

    ddl = ", ".join(["pid long", "pool string", *(f"{m.replace('.', '_')} boolean" for m in MODULES)])
    return [row.asDict() for row in spark.range(0, 2, 1, 2).mapInArrow(imported, ddl).collect()]


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    workdir = arguments["workdir"]
    spark = get_spark("workers-ahead", "local[2]", {"spark.ui.enabled": "false"})
    try:
        before = ask_workers(spark)
        sink = IcebergSink.from_options(
            {
                "catalog.name": "ahead",
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{workdir}/catalog.db",
                "catalog.warehouse": f"file://{workdir}/warehouse",
                "table": "db.ahead",
            }
        )
        sink.prepare(st.StructType([st.StructField("id", st.LongType())]))
        for thread in threading.enumerate():
            if thread.name == "icesink-workers-ahead":
                thread.join(JOIN_TIMEOUT_S)
        after = ask_workers(spark)
    finally:
        spark.stop()
    return {"before": before, "after": after}


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
