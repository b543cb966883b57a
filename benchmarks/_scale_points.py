"""One point of :mod:`benchmarks.scale`: micro-batches of the reference workload, each one measured.

A :class:`Point` says what one micro-batch holds (rows, partition values, tables it is
routed to) and what the table holds already (snapshots). :func:`measure` calls a fresh
:class:`~icesink.IcebergSink` (SQLite catalog, local warehouse) on ``warm_up + batches``
DataFrames, one Parquet file of the workload each, and measures every call: its wall
time, the sink's step timings (``icesink_step_duration_seconds``, summed over tables),
the Spark jobs it ran (:mod:`benchmarks._spark_jobs`: their span and task time), the data
files it wrote, and the CPU time of the Python driver and of the driver's JVM.

Two settings keep every batch on the path large batches take, a bucket shuffle written
by several tasks: each input file is read in ``input_tasks`` tasks (:data:`INPUT_TASKS` by
default; a file read in one task is written without a shuffle), and the target file size is
:data:`TARGET_FILE_SIZE_BYTES`, below what a batch writes (after a batch that wrote at most
one target file, the next is written by one task or the driver) and above any one
partition value's file (none rolls).

:func:`driver_main` is :func:`measure` in a driver process of its own (``python -m
benchmarks.scale --driver``, arguments as JSON on standard input), for another master.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks._probes import cpu_seconds
from benchmarks._spark_jobs import SparkJobs
from benchmarks._stream import Layout
from benchmarks._synthetic_files import fill_history
from icesink import IcebergSink
from icesink.jobs.taxi_workload import write_files
from icesink.write.messages import DataFileMessage

INPUT_TASKS = 2
TARGET_FILE_SIZE_BYTES = 2 * 1024 * 1024
TABLE = "bench.taxi"
ROUTE_COLUMN = "route_table"
_TEMPLATE_DAY = 19_723  # 2024-01-01, the workload's first day, in days since 1970-01-01
_TEMPLATE_ROWS, _TEMPLATE_BYTES = 3_000, 90_000  # about what one partition value of a batch writes


@dataclass(frozen=True)
class Point:
    """One measured setting; the axis it belongs to varies one of these from the base.

    Attributes:
        axis: The axis (``rows``, ``partitions``, ``tables``, ``snapshots``, ``executors``).
        label: The varied value as the tables show it.
        rows: Rows per micro-batch.
        partition_values: Partition values of the layout (:class:`~benchmarks._contenders.Layout`).
        tables: Tables each batch is routed to (``route.by=field``); 0: one table, not routed.
        snapshots: Snapshots given to the table before the first batch.
        input_tasks: Tasks that read each batch's input (the shuffle's map tasks).
        master: Spark master of the driver that measures the point.
        warm_up: Batches run first and not counted.
        batches: Batches measured.
    """

    axis: str
    label: str
    rows: int = 200_000
    partition_values: int = 64
    tables: int = 0
    snapshots: int = 0
    input_tasks: int = INPUT_TASKS
    master: str = "local[2]"
    warm_up: int = 1
    batches: int = 3


@dataclass
class BatchCost:
    """What one micro-batch cost (seconds unless named otherwise)."""

    wall_s: float
    steps: dict[str, float]
    jobs: int
    tasks: int
    job_span_s: float
    task_s: float
    files: int
    driver_cpu_s: float
    driver_jvm_cpu_s: float
    outside_jobs_s: float = field(init=False)
    planning_s: float = field(init=False)

    def __post_init__(self) -> None:
        # The driver alone: the call's time during which no Spark job ran. The commit is
        # the sink's own step; the rest is planning and bookkeeping (normalize, route,
        # write spec and attempt record, collecting the files' messages).
        self.outside_jobs_s = max(0.0, self.wall_s - self.job_span_s)
        self.planning_s = max(0.0, self.outside_jobs_s - self.steps.get("commit", 0.0))


def input_folder(spark: SparkSession, workdir: Path, point: Point) -> Path:
    """The point's input files (kept in ``workdir`` by shape; made once)."""
    files = point.warm_up + point.batches
    folder = workdir / f"scale-input-{files}x{point.rows}-rg{point.input_tasks}"
    return write_files(spark, folder, files, point.rows, point.input_tasks)


def sink_options(point: Point, run_dir: Path) -> dict[str, str]:
    """The sink's options: the reference layout, a bucket shuffle; routed (unshuffled) if ``tables``."""
    options = {
        "catalog.name": "bench",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{run_dir}/catalog.db",
        "catalog.warehouse": f"file://{run_dir}/warehouse",
        "sink-id": "scale",
        "partition-by": Layout(point.partition_values).partition_by,
        "write.target-file-size-bytes": str(TARGET_FILE_SIZE_BYTES),
    }
    if point.tables:  # routed writes are not shuffled: each task writes what it holds
        options |= {"route.by": "field", "route.field": ROUTE_COLUMN, "route.table-template": "bench.{value}"}
    else:
        options |= {"table": TABLE, "distribution-mode": "bucket"}
    return options


def _frames(spark: SparkSession, folder: Path, point: Point) -> Iterator[DataFrame]:
    files = sorted(folder.glob("*.parquet"))
    # Split each file in input_tasks ranges: Spark reads one task per range (at row groups).
    largest = max(f.stat().st_size for f in files)
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(math.ceil(largest / point.input_tasks)))
    layout = Layout(point.partition_values)
    for path in files:
        df = layout.prepare(spark.read.parquet(str(path)))
        if point.tables:
            table = F.pmod(F.col("PULocationID"), F.lit(point.tables)).cast("string")
            df = df.withColumn(ROUTE_COLUMN, F.concat(F.lit("t"), table))
        yield df


def _sums(sink: IcebergSink, sample: str, label: str) -> dict[str, float]:
    """The values of the metric sample ``sample`` summed over every label but ``label``."""
    totals: dict[str, float] = {}
    for family in sink.metrics.registry.collect():
        for s in family.samples:
            if s.name == sample:
                key = s.labels.get(label, "")
                totals[key] = totals.get(key, 0.0) + s.value
    return totals


class _Measured:
    """Calls the sink on one batch and measures the call."""

    def __init__(self, sink: IcebergSink, spark: SparkSession, jvm_pid: int) -> None:
        self.sink = sink
        self.jobs = SparkJobs(spark)
        self.jvm_pid = jvm_pid

    def __call__(self, df: DataFrame, batch_id: int) -> BatchCost:
        steps = _sums(self.sink, "icesink_step_duration_seconds_sum", "step")
        files = sum(_sums(self.sink, "icesink_files_written_total", "").values())
        mark = self.jobs.mark()
        cpu, jvm_cpu = os.times(), cpu_seconds(self.jvm_pid)
        started = time.perf_counter()
        self.sink(df, batch_id)
        wall = time.perf_counter() - started
        cpu_after, jvm_cpu_after = os.times(), cpu_seconds(self.jvm_pid)
        jobs = self.jobs.since(mark)
        steps_after = _sums(self.sink, "icesink_step_duration_seconds_sum", "step")
        return BatchCost(
            wall_s=wall,
            steps={k: v - steps.get(k, 0.0) for k, v in steps_after.items()},
            jobs=jobs.jobs,
            tasks=jobs.tasks,
            job_span_s=jobs.span_s,
            task_s=jobs.task_s,
            files=round(sum(_sums(self.sink, "icesink_files_written_total", "").values()) - files),
            driver_cpu_s=(cpu_after.user + cpu_after.system) - (cpu.user + cpu.system),
            driver_jvm_cpu_s=jvm_cpu_after - jvm_cpu,
        )


def _template(table: Any) -> DataFileMessage:
    """A data file entry of ``table``'s first partition value, for the history (never opened)."""
    return DataFileMessage(
        path=f"{table.location()}/data/template.parquet",
        partition=(_TEMPLATE_DAY, 0),
        spec_id=table.spec().spec_id,
        record_count=_TEMPLATE_ROWS,
        file_size_bytes=_TEMPLATE_BYTES,
    )


def measure(spark: SparkSession, point: Point, folder: Path, run_dir: Path, jvm_pid: int) -> dict[str, Any]:
    """The point's batches through a fresh sink and table; each batch's cost, and their medians."""
    run_dir.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()[0]
    sink = IcebergSink.from_options(sink_options(point, run_dir))
    frames = list(_frames(spark, folder, point))
    with sink:
        if point.snapshots:
            table = sink.prepare(frames[0].schema)
            fill_history(table, _template(table), point.snapshots)
        measured = _Measured(sink, spark, jvm_pid)
        costs = [measured(df, batch_id) for batch_id, df in enumerate(frames)]
        written = sum(_sums(sink, "icesink_rows_written_total", "").values())
    if written != point.rows * len(frames):  # a benchmark that loses rows measures nothing
        raise AssertionError(f"{point}: the sink wrote {written} rows of {point.rows * len(frames)}")
    kept = costs[point.warm_up :]
    return {
        "point": asdict(point),
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "batches": [asdict(c) for c in costs],
        "median": summarize(kept),
    }


def warm_up_session(spark: SparkSession, point: Point, folder: Path, run_dir: Path, jvm_pid: int) -> None:
    """``point`` measured once and forgotten: a new driver's first batches pay for the JIT and the imports."""
    measure(spark, point, folder, run_dir, jvm_pid)
    shutil.rmtree(run_dir, ignore_errors=True)


def summarize(costs: list[BatchCost]) -> dict[str, float]:
    """Per measure, the median over ``costs``."""
    flat = []
    for cost in costs:
        row = {k: v for k, v in asdict(cost).items() if k != "steps"}
        flat.append(row | {f"step_{k}": v for k, v in cost.steps.items()})
    keys = sorted({k for r in flat for k in r})
    return {k: round(statistics.median(r.get(k, 0.0) for r in flat), 4) for k in keys}


def driver_main(arguments: dict[str, Any]) -> dict[str, Any]:
    """:func:`measure` of ``arguments["point"]`` in this process, a driver on ``point.master``.

    Arguments: ``point`` (a :class:`Point` as a mapping), ``cluster`` (the cluster's executor
    settings apply), ``workdir`` (where the inputs are), ``run_dir``.
    """
    from benchmarks._deploy_runs import CLUSTER_CONF, DRIVER_CONF
    from icesink.jobs.spark import get_spark

    point = Point(**arguments["point"])
    conf = {**DRIVER_CONF, **(CLUSTER_CONF if arguments["cluster"] else {})}
    spark = get_spark("icesink-bench-scale", point.master, conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        jvm: Any = spark.sparkContext._jvm
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        folder = input_folder(spark, Path(arguments["workdir"]), point)
        run_dir = Path(arguments["run_dir"])
        warm_up_session(spark, point, folder, run_dir / "warm-up", jvm_pid)
        return measure(spark, point, folder, run_dir / "measured", jvm_pid)
    finally:
        spark.stop()
