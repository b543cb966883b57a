"""What a new job pays once, before its micro-batches run at their steady speed.

Each measurement runs in this (new) process, the way a job starts, and is repeated at
once to show which part is paid only the first time:

* the SparkSession;
* Spark's Python workers: a first ``mapInArrow`` job (the worker daemon, one worker per
  core) against a second one on the same, now running, workers;
* the write task's imports in those workers, timed inside each worker: what unpickling
  the sink's ``mapInArrow`` function costs there the first time, then what a task's
  first rows import (pyiceberg's Arrow file IO; unpickling imported it too before it was
  made lazy);
* the routing self-checks of :mod:`icesink.route.self_check` (bucket hash of int/long
  columns, the exact shuffle) as a bucketed table's first batch runs them, then each
  alone once more (``--sequential-self-checks``: the first time one after the other);
* creating the sink and its table (``IcebergSink.from_options`` and ``prepare``).

Run it a few times, each a new process, and take medians::

    for i in 1 2 3; do
        .venv/bin/python -m benchmarks.fresh_costs --out costs.jsonl
        .venv/bin/python -m benchmarks.fresh_costs --out costs.jsonl --sequential-self-checks
    done
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from benchmarks._session import _session
from icesink.jobs.taxi_workload import taxi_rows

#: What a write task's ``mapInArrow`` function imports when it is unpickled in a worker.
TASK_MODULES = ("icesink.write.task", "icesink.write.routed_task")
#: What its first rows import (before the lazy imports, unpickling the function did).
FIRST_ROWS_MODULES = ("pyiceberg.io.pyarrow",)


def _timed(function: Callable[[], Any]) -> float:
    started = time.perf_counter()
    function()
    return round(time.perf_counter() - started, 3)


def _plain(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict(
        {"pid": [os.getpid()], "seconds": [0.0], "rows_seconds": [0.0], "modules": [len(sys.modules)]}
    )


def _importing(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import importlib

    for _ in batches:
        pass
    started = time.perf_counter()
    for module in TASK_MODULES:
        importlib.import_module(module)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    for module in FIRST_ROWS_MODULES:
        importlib.import_module(module)
    rows_seconds = time.perf_counter() - started
    yield pa.RecordBatch.from_pydict(
        {
            "pid": [os.getpid()],
            "seconds": [seconds],
            "rows_seconds": [rows_seconds],
            "modules": [len(sys.modules)],
        }
    )


def _python_job(spark: SparkSession, function: Any) -> tuple[float, list[dict[str, Any]]]:
    cores = spark.sparkContext.defaultParallelism
    df = spark.range(cores, numPartitions=cores).mapInArrow(
        function, "pid long, seconds double, rows_seconds double, modules long"
    )
    started = time.perf_counter()
    rows = [r.asDict() for r in df.collect()]
    return round(time.perf_counter() - started, 3), rows


def measure(workdir: Path, sequential_self_checks: bool = False) -> dict[str, Any]:
    """Every start-up cost of the module docstring, each followed by its second time."""
    from pyiceberg.types import IntegerType

    from icesink.route.self_check import BUCKET_HASH_VECTORS, verify_bucket_function, verify_partition_keys
    from icesink.route.self_check_runs import ensure_self_checks

    result: dict[str, Any] = {
        "load_average_start": os.getloadavg()[0],
        "self_checks": "sequential" if sequential_self_checks else "as the sink runs them",
    }
    started = time.perf_counter()
    spark = _session("local[2]")
    result["session_s"] = round(time.perf_counter() - started, 3)
    # Any first job pays for the JVM's cold code paths: a JVM-only job first, to tell them apart.
    result["jvm_job_first_s"] = _timed(
        lambda: spark.range(10, numPartitions=2).selectExpr("sum(id)").collect()
    )
    result["jvm_job_second_s"] = _timed(
        lambda: spark.range(10, numPartitions=2).selectExpr("sum(id)").collect()
    )
    for label, function in (("python_workers_first", _plain), ("python_workers_second", _plain)):
        result[label + "_s"], _ = _python_job(spark, function)
    seconds, rows = _python_job(spark, _importing)
    result["task_imports_job_s"] = seconds
    result["task_imports_in_workers_s"] = sorted(round(r["seconds"], 3) for r in rows)
    result["first_rows_imports_in_workers_s"] = sorted(round(r["rows_seconds"], 3) for r in rows)
    result["worker_modules_after_imports"] = rows[0]["modules"]
    result["task_imports_job_second_s"], _ = _python_job(spark, _importing)
    ints = [v for v in BUCKET_HASH_VECTORS if str(v.source_type) in ("int", "long")]
    # First as a bucketed table's first batch runs them (both at once, or one after the
    # other as before), then each alone, once more.
    if sequential_self_checks:

        def one_after_the_other() -> None:
            verify_bucket_function(spark, ints)
            verify_partition_keys(spark)

        result["self_checks_first_s"] = _timed(one_after_the_other)
    else:
        result["self_checks_first_s"] = _timed(lambda: ensure_self_checks(spark, [IntegerType()], True))
    result["self_check_hash_second_s"] = _timed(lambda: verify_bucket_function(spark, ints))
    result["self_check_shuffle_second_s"] = _timed(lambda: verify_partition_keys(spark))
    schema = taxi_rows(spark, 0, 10).schema
    result["sink_and_table_first_s"] = _timed(lambda: _create_table(workdir / "first", schema))
    result["sink_and_table_second_s"] = _timed(lambda: _create_table(workdir / "second", schema))
    spark.stop()
    result["load_average_end"] = os.getloadavg()[0]
    return result


def _create_table(folder: Path, schema: Any) -> None:
    from icesink import IcebergSink

    folder.mkdir(parents=True)
    sink = IcebergSink.from_options(
        {
            "catalog.name": "bench",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{folder}/catalog.db",
            "catalog.warehouse": f"file://{folder}/warehouse",
            "table": "bench.taxi",
            "partition-by": "day(tpep_pickup_datetime), bucket(16, PULocationID)",
        }
    )
    sink.prepare(schema)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="append the figures as one JSON line here")
    parser.add_argument(
        "--sequential-self-checks",
        action="store_true",
        help="run the first self-checks one after the other (as the sink did before it ran them at once)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesink-fresh-costs-") as workdir:
        result = measure(Path(workdir), args.sequential_self_checks)
    line = json.dumps(result)
    print(line, flush=True)
    if args.out:
        with args.out.open("a") as out:
            out.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
