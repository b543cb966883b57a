"""The Spark session, input stream and machine state every benchmark starts from.

:func:`_session` is the jobs' session (Spark's classes mapped from the class archive) with
the UI off and UTC, :func:`plain_session` the plain session of the README's quick start
(:func:`session_of` by name); :func:`_stream` writes the reference workload's files once per shape
(:mod:`icesink.jobs.taxi_workload`); :func:`_machine` records what a figure was measured
on; :func:`_run_in_process` runs ``benchmarks.run`` in a process of its own.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks._stream import Layout, Stream
from icesink.jobs.spark import with_class_archive
from icesink.jobs.taxi_workload import write_files


def _session(master: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = with_class_archive(dict(conf or {}))  # as the jobs' session: Spark's classes mapped
    spark = (
        SparkSession.builder.master(master)
        .appName("icesink-throughput")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config(map=dict(options))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def plain_session(master: str) -> SparkSession:
    """A user's session as the README starts one: ``master``, 2 shuffle partitions, 4g, UTC; nothing else.

    No class archive, Spark's UI on: what a ``foreachBatch(sink)`` of the quick start
    runs on, against the project's tuned :func:`_session`.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


SESSIONS = ("project", "plain")
"""The sessions a throughput run can start: the benchmarks' own, or :func:`plain_session`."""


def session_of(kind: str, master: str) -> SparkSession:
    """The session named ``kind``, one of :data:`SESSIONS`."""
    if kind not in SESSIONS:
        raise ValueError(f"session {kind!r} is not one of {SESSIONS}")
    return plain_session(master) if kind == "plain" else _session(master)


def _jvm_pid(spark: SparkSession) -> int:
    jvm: Any = spark.sparkContext._jvm
    return int(jvm.java.lang.ProcessHandle.current().pid())


def _stream(
    spark: SparkSession, workdir: Path, batches: int, rows: int, layout: Layout, row_groups: int = 1
) -> Stream:
    started = time.perf_counter()
    name = f"input-{batches}x{rows}" + (f"-rg{row_groups}" if row_groups > 1 else "")
    source = write_files(spark, workdir / name, batches, rows, row_groups)
    seconds = time.perf_counter() - started
    if seconds > 1:
        _log(f"generated {batches} x {rows:,} rows in {source} ({seconds:.0f} s)")
    schema = spark.read.parquet(str(source)).schema
    return Stream(spark, source, schema, layout, rows * batches, batches)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _machine(load_start: Sequence[float], load_end: Sequence[float]) -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("pyspark", "pyiceberg", "pyarrow")},
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in load_end],
    }


def _run_in_process(label: str, options: list[str], out: Path) -> dict[str, Any]:
    """``benchmarks.run`` with ``options`` in a process of its own; its results, timed."""
    command = [sys.executable, "-m", "benchmarks.run", *options, "--out", str(out)]
    _log(f"{label}: {' '.join(command[1:])}")
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=sys.stderr)  # its tables are logs here; ours go to stdout
    result: dict[str, Any] = json.loads(out.read_text())
    result["elapsed_s"] = round(time.perf_counter() - started)
    return result
