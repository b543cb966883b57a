"""The contenders of :mod:`benchmarks.run`: each writes the same stream somewhere and says what it wrote.

Every run gets a fresh checkpoint and a fresh output location under ``run_dir``, and
checks that its output holds exactly the stream's rows (a benchmark that loses rows
measures nothing). The stream is the reference workload's Parquet files read one file
per micro-batch with ``trigger(availableNow=True)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from benchmarks._count_floor import count_rows
from benchmarks._probes import ProbeResult, ProcessProbe, size_summary
from benchmarks._stream import Layout, Stream
from icesink import IcebergSink
from icesink.metric_families import STEPS, TASK_PHASES
from icesink.partitioning import build_partition_spec, parse_partition_by
from icesink.spark_session import local_property
from icesink.type_mapping import spark_to_iceberg_schema
from icesink.write.arrow_input import MAX_BYTES_PER_BATCH, UNCHECKED

TABLE = "bench.taxi"


@dataclass(frozen=True)
class QueryRun:
    """What :func:`_run_query` measured of one query.

    Attributes:
        seconds: Wall time from ``start()`` to the end of ``awaitTermination()``.
        probe: The process probe's figures.
        trigger_ms: Per micro-batch with rows, Spark's progress ``durationMs`` (``addBatch``,
            ``queryPlanning``, ``triggerExecution``, ...), in batch order.
    """

    seconds: float
    probe: ProbeResult
    trigger_ms: list[dict[str, int]]


@dataclass
class RunResult:
    """One run of one contender."""

    contender: str
    seconds: float
    rows: int
    probe: ProbeResult
    files: dict[str, int] = field(default_factory=dict)
    batch_seconds: list[float] = field(default_factory=list)
    commit_seconds: list[float] = field(default_factory=list)
    step_seconds: dict[str, float] = field(default_factory=dict)
    trigger_ms: list[dict[str, int]] = field(default_factory=list)
    batch_step_seconds: list[dict[str, float]] = field(default_factory=list)
    task_seconds: list[dict[str, float]] = field(default_factory=list)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "contender": self.contender,
            "seconds": round(self.seconds, 3),
            "rows": self.rows,
            "rows_per_s": round(self.rows_per_s),
            "files": self.files,
            "batch_seconds": [round(s, 4) for s in self.batch_seconds],
            "commit_seconds": [round(s, 4) for s in self.commit_seconds],
            "step_seconds": {k: round(v, 3) for k, v in self.step_seconds.items()},
            "trigger_ms": self.trigger_ms,
            "batch_step_seconds": [{k: round(v, 3) for k, v in b.items()} for b in self.batch_step_seconds],
            "task_seconds": [{k: round(v, 3) for k, v in b.items()} for b in self.task_seconds],
            "memory": {k: v for k, v in vars(self.probe).items() if k.endswith("_bytes")},
            "cpu_seconds": self.probe.cpu_seconds,
            "worker_system_seconds": self.probe.worker_system_seconds,
            "probe_samples": self.probe.samples,
        }


BatchFunction = Callable[[DataFrame, int], None]


class _TimedBatches:
    """Wraps a ``foreachBatch`` function: time of each call (write and commit included).

    With ``sink``, also each step's time in each call (the commit's, and all of them in
    ``batch_step_seconds``), read from the sink's ``icesink_step_duration_seconds``
    histogram before and after the call, and the longest write task's input and close
    phases (``task_seconds``, from ``icesink_write_task_seconds_max``).
    """

    def __init__(self, function: BatchFunction, sink: IcebergSink | None = None) -> None:
        self.function = function
        self.sink = sink
        self.batch_seconds: list[float] = []
        self.commit_seconds: list[float] = []
        self.batch_step_seconds: list[dict[str, float]] = []
        self.task_seconds: list[dict[str, float]] = []

    def step_sum(self, step: str) -> float:
        return self._sample("icesink_step_duration_seconds_sum", step=step)

    def task_phase(self, phase: str) -> float:
        return self._sample("icesink_write_task_seconds_max", phase=phase)

    def _sample(self, name: str, **labels: str) -> float:
        """The sink's metric ``name`` for the benchmark's table (0 before it has one)."""
        assert self.sink is not None
        return self.sink.metrics.registry.get_sample_value(name, {"table": TABLE, **labels}) or 0.0

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        before = {step: self.step_sum(step) for step in STEPS} if self.sink else {}
        start = time.perf_counter()
        self.function(batch_df, batch_id)
        self.batch_seconds.append(time.perf_counter() - start)
        if self.sink:
            steps = {step: self.step_sum(step) - before[step] for step in STEPS}
            self.commit_seconds.append(steps["commit"])
            self.batch_step_seconds.append(steps)
            self.task_seconds.append({phase: self.task_phase(phase) for phase in TASK_PHASES})


def _run_query(
    stream: Stream,
    name: str,
    writer: DataStreamWriter,
    run_dir: Path,
    jvm_pid: int,
    table: str | None = None,
    scans: int = 1,
) -> QueryRun:
    """Start the query, wait for it to end; its wall time, the probe's figures, Spark's batch times.

    ``table``: the catalog table to write (``toTable``) rather than the writer's path;
    ``scans``: how many times the query reads each batch (a range distribution samples it first).
    """
    writer = writer.option("checkpointLocation", str(run_dir / "checkpoint")).trigger(availableNow=True)
    writer = writer.queryName(f"bench_{name.replace('-', '_')}_{run_dir.name}")
    with ProcessProbe(jvm_pid) as probe:
        start = time.perf_counter()
        query = writer.toTable(table) if table else writer.start()
        query.awaitTermination()
        seconds = time.perf_counter() - start
    progress = [p for p in query.recentProgress if p.numInputRows]
    read = sum(p.numInputRows for p in progress)
    if read != stream.rows * scans or len(progress) != stream.batches:
        raise AssertionError(
            f"{name}: the query read {read} rows in {len(progress)} batches, "
            f"expected {stream.rows} x {scans} in {stream.batches}"
        )
    trigger_ms = [{k: int(v) for k, v in sorted(p.durationMs.items())} for p in progress]
    return QueryRun(seconds, probe.result, trigger_ms)


def _check_rows(name: str, written: int, stream: Stream) -> None:
    if written != stream.rows:
        raise AssertionError(f"{name}: {written} rows in the output, {stream.rows} in the stream")


def _iceberg_files(table: Table) -> tuple[int, dict[str, int]]:
    files = table.inspect.files()
    rows = sum(files.column("record_count").to_pylist())
    return rows, size_summary(files.column("file_size_in_bytes").to_pylist())


def icesink_options(run_dir: Path, layout: Layout, mode: str) -> dict[str, str]:
    """The benchmark's sink options: ``mode``, an SQLite catalog and its warehouse in ``run_dir``."""
    return {
        "catalog.name": "bench",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{run_dir}/catalog.db",
        "catalog.warehouse": f"file://{run_dir}/warehouse",
        "table": TABLE,
        "partition-by": layout.partition_by,
        "distribution-mode": mode,
    }


def run_icesink(mode: str) -> Contender:
    """icesink with ``distribution-mode`` = ``mode``, default options otherwise."""

    def run(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
        name = f"icesink-{mode}"
        sink = IcebergSink.from_options(icesink_options(run_dir, stream.layout, mode))
        df = stream.read()
        sink.prepare(df.schema)
        timed = _TimedBatches(sink, sink)
        query = _run_query(stream, name, df.writeStream.foreachBatch(timed), run_dir, jvm_pid)
        rows, files = _iceberg_files(sink.catalog.load_table(TABLE))
        _check_rows(name, rows, stream)
        steps = {step: timed.step_sum(step) for step in STEPS}
        return RunResult(
            name, query.seconds, rows, query.probe, files, timed.batch_seconds, timed.commit_seconds, steps,
            query.trigger_ms, timed.batch_step_seconds, timed.task_seconds,
        )  # fmt: skip

    return run


def run_parquet(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
    """Spark's Parquet file sink, partitioned by the same day and (Spark-hash) bucket values."""
    layout = stream.layout
    df = (
        stream.read()
        .withColumn("day", F.to_date("tpep_pickup_datetime"))
        .withColumn("bucket", F.pmod(F.hash(layout.bucket_column), F.lit(layout.buckets)))
    )
    output = run_dir / "output"
    writer = df.writeStream.format("parquet").partitionBy("day", "bucket").option("path", str(output))
    query = _run_query(stream, "parquet", writer, run_dir, jvm_pid)
    paths = [p for p in output.rglob("*.parquet") if "_spark_metadata" not in p.parts]
    rows = sum(pq.read_metadata(p).num_rows for p in paths)
    _check_rows("parquet", rows, stream)
    files = size_summary(p.stat().st_size for p in paths)
    return RunResult("parquet", query.seconds, rows, query.probe, files, trigger_ms=query.trigger_ms)


def run_noop(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
    """Spark's ``noop`` sink: reads every row, writes nothing (the floor of any sink)."""
    writer = stream.read().writeStream.format("noop")
    query = _run_query(stream, "noop", writer, run_dir, jvm_pid)
    # Rows checked from the query's progress.
    return RunResult("noop", query.seconds, stream.rows, query.probe, trigger_ms=query.trigger_ms)


def run_count(unchecked: bool = False) -> Contender:
    """Every row through ``mapInArrow`` into a Python worker, counted: the floor of Arrow-based designs.

    ``unchecked``: without Spark's byte check on every row (:mod:`icesink.write.arrow_input`),
    as icesink's writes run after their first batch.
    """
    name = "mapinarrow-count-unchecked" if unchecked else "mapinarrow-count"

    def run(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
        counted: list[int] = []

        def count(batch_df: DataFrame, batch_id: int) -> None:
            spark = batch_df.sparkSession
            with local_property(spark, MAX_BYTES_PER_BATCH, str(UNCHECKED)) if unchecked else nullcontext():
                counted.append(batch_df.mapInArrow(count_rows, "n long").agg(F.sum("n")).collect()[0][0] or 0)

        timed = _TimedBatches(count)
        query = _run_query(stream, name, stream.read().writeStream.foreachBatch(timed), run_dir, jvm_pid)
        _check_rows(name, sum(counted), stream)
        return RunResult(
            name, query.seconds, sum(counted), query.probe,
            batch_seconds=timed.batch_seconds, trigger_ms=query.trigger_ms,
        )  # fmt: skip

    return run


def run_naive(stream: Stream, run_dir: Path, jvm_pid: int) -> RunResult:
    """pyiceberg's own partitioned append of each whole batch, collected to the driver with ``toArrow()``."""
    df = stream.read()
    catalog = load_catalog(
        "naive", type="sql", uri=f"sqlite:///{run_dir}/catalog.db", warehouse=f"file://{run_dir}/warehouse"
    )
    catalog.create_namespace("bench")
    schema = spark_to_iceberg_schema(df.schema)  # Spark timestamps are timestamptz, as toArrow() gives them
    spec = build_partition_spec(parse_partition_by(stream.layout.partition_by), schema)
    table = catalog.create_table(TABLE, schema=schema, partition_spec=spec)
    timed = _TimedBatches(lambda batch_df, batch_id: table.append(batch_df.toArrow()))
    query = _run_query(stream, "pyiceberg-naive", df.writeStream.foreachBatch(timed), run_dir, jvm_pid)
    rows, files = _iceberg_files(catalog.load_table(TABLE))
    _check_rows("pyiceberg-naive", rows, stream)
    return RunResult(
        "pyiceberg-naive", query.seconds, rows, query.probe, files, timed.batch_seconds,
        trigger_ms=query.trigger_ms,
    )  # fmt: skip


Contender = Callable[[Stream, Path, int], RunResult]

CONTENDERS: dict[str, Contender] = {
    "icesink-bucket": run_icesink("bucket"),
    "icesink-hash": run_icesink("hash"),
    "icesink-none": run_icesink("none"),
    "parquet": run_parquet,
    "noop": run_noop,
    "mapinarrow-count": run_count(),
    "mapinarrow-count-unchecked": run_count(unchecked=True),
    "pyiceberg-naive": run_naive,
}
