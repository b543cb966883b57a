"""CPU per micro-batch of each writer on input read in one task per core, in one warm session.

::

    .venv/bin/python -m benchmarks.route_cpu --contenders icesink-bucket,icesink-none,parquet --rounds 3

One Parquet file of ``--rows`` rows of the reference workload in ``--row-groups`` row groups
(Spark reads it in about one task per core) is written again and again by each contender
in a plain ``local[2]`` session (``spark.sql.shuffle.partitions=2``, 4g, UTC): icesink is
called with the batch DataFrame as ``foreachBatch`` would (two batches first, not counted,
so that the router knows the previous batch), Spark's Parquet sink writes it partitioned
alike. Reported per contender, the median per batch of the CPU seconds of the JVM (its
threads grouped by name: task threads, JIT compilers, GC, the rest), of the Python workers
and of the driver, from ``/proc``, and the wall time. On a shared machine read the CPU;
Python workers that exit between two samples take their CPU with them.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import psutil
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks._process_cpu import tree_cpu_seconds
from icesink import IcebergSink
from icesink.jobs.taxi_workload import PARTITION_BY, write_files


def _thread_cpu(jvm: int) -> dict[str, float]:
    """CPU seconds of the JVM's live threads, grouped by what they do."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for tid in os.listdir(f"/proc/{jvm}/task"):
        try:
            stat = Path(f"/proc/{jvm}/task/{tid}/stat").read_text()
            name = Path(f"/proc/{jvm}/task/{tid}/comm").read_text().strip()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        group = (
            "task"
            if name.startswith("Executor task")
            else "jit"
            if "Compiler" in name
            else "gc"
            if name.startswith(("GC", "G1"))
            else "other"
        )
        out[group] += (int(fields[11]) + int(fields[12])) / tick
    return out


class _Writers:
    def __init__(self, df: DataFrame, work: Path) -> None:
        self._df, self._work = df, work
        self._sinks: dict[str, IcebergSink] = {}

    def write(self, name: str, batch_id: int) -> None:
        if name == "parquet":
            day = F.to_date("tpep_pickup_datetime")
            bucket = F.pmod(F.hash("PULocationID"), F.lit(16))
            out = self._work / "parquet" / str(batch_id)
            self._df.withColumn("day", day).withColumn("bucket", bucket).write.partitionBy(
                "day", "bucket"
            ).parquet(str(out))
            return
        if name not in self._sinks:
            run_dir = self._work / name
            run_dir.mkdir()
            options = {
                "catalog.name": "bench",
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{run_dir}/catalog.db",
                "catalog.warehouse": f"file://{run_dir}/warehouse",
                "table": "bench.taxi",
                "partition-by": PARTITION_BY,
                "distribution-mode": name.removeprefix("icesink-"),
                "sink-id": name,
            }
            self._sinks[name] = IcebergSink.from_options(options)
            self._sinks[name].prepare(self._df.schema)
        self._sinks[name](self._df, batch_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contenders", default="icesink-bucket,icesink-none,parquet")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--row-groups", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "icesink-route-cpu")
    args = parser.parse_args(argv)
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    folder = write_files(
        spark, args.workdir / f"input-{args.rows}-rg{args.row_groups}", 1, args.rows, args.row_groups
    )
    jvm = next(p.pid for p in psutil.Process().children(recursive=True) if p.name() == "java")
    work = Path(tempfile.mkdtemp(prefix="run-", dir=args.workdir))
    writers = _Writers(spark.read.parquet(str(folder)), work)
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    samples: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for name in names:
        writers.write(name, 0)
        writers.write(name, 1)
    for round_ in range(args.rounds):
        for name in names:
            cpu, threads, started = tree_cpu_seconds(), _thread_cpu(jvm), time.perf_counter()
            writers.write(name, round_ + 2)
            wall = time.perf_counter() - started
            cpu_after, threads_after = tree_cpu_seconds(), _thread_cpu(jvm)
            sample = {kind: cpu_after[kind] - cpu[kind] for kind in ("jvm", "python_workers", "driver")}
            sample.update({g: threads_after[g] - threads[g] for g in ("task", "jit", "gc", "other")})
            samples[name].append({**sample, "wall": wall})
    print(f"load {os.getloadavg()}")
    for name, runs in samples.items():
        medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"{name:16s} " + "  ".join(f"{k} {v:.2f}" for k, v in medians.items()))
    spark.stop()
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
