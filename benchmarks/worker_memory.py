"""Python worker memory: does a write task stay within its memory budget?

::

    .venv/bin/python -m benchmarks.worker_memory --rows 8000000

Each setting (``--partition-values`` times ``--budgets``, the sink option
``write.fanout.memory-budget-bytes``) runs in a process of its own, so that its Spark
application, and with it every Python worker, is new. In it:

1. A warm-up batch of ``--warmup-rows`` rows goes through a first sink (a table of its
   own), written by as many tasks as the measured batch: each Python worker then has
   imported what a write needs. Each worker's resident memory (``VmRSS``) afterwards,
   idle, is its baseline: the interpreter, pyspark, pyarrow, pyiceberg and the sink.
2. One batch of ``--rows`` rows of the reference workload plus an identity partition
   column ``part`` (``--partition-values`` values, spread by a hash of the row) goes
   through a second sink with ``distribution-mode=none``: every one of the ``--tasks``
   tasks sees every partition value, the fanout's worst case.

A worker's peak is its kernel-kept high-water mark (``VmHWM``), read from ``/proc``
every ``--interval`` seconds while the batch is written and once after it, so that no
spike between two samples is missed (workers are reused, and the warm-up's peak is far
below the batch's). Reported per setting: the budget, the Arrow bytes each task
received, the largest worker baseline and peak, the peak above the baseline, and
whether the peak is within the budget plus the baseline; and what the sink itself
measured inside its tasks (``icesink_task_peak_rss_bytes``,
``icesink_buffered_bytes_max``, ``icesink_open_writers_max``) and the files it wrote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks._probes import python_workers, rss_bytes
from benchmarks._session import _jvm_pid, _machine, _session
from icesink import IcebergSink
from icesink.config import DEFAULT_MEMORY_BUDGET_BYTES
from icesink.jobs.taxi_workload import taxi_rows

MIB = 1024 * 1024
DEFAULT_BUDGETS = f"{DEFAULT_MEMORY_BUDGET_BYTES},{64 * MIB}"
DEFAULT_VALUES = "64,16384"


def _status_bytes(pid: int, key: bytes) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` in bytes (0 when the process is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_bytes()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith(key + b":"):
            return int(line.split()[1]) * 1024
    return 0


def _workers(jvm_pid: int) -> list[int]:
    """The forked Python workers: descendants of the JVM that are not the daemon itself."""
    return [pid for pid, stat in python_workers(jvm_pid).items() if stat.ppid != jvm_pid]


class _HighWaterMarks:
    """Each worker's ``VmHWM``, read every ``interval_s`` in a thread and once at the end."""

    def __init__(self, jvm_pid: int, interval_s: float) -> None:
        self.jvm_pid = jvm_pid
        self.interval_s = interval_s
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-worker-hwm", daemon=True)

    def _sample(self) -> None:
        for pid in _workers(self.jvm_pid):
            self.peaks[pid] = max(self.peaks.get(pid, 0), _status_bytes(pid, b"VmHWM"))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> _HighWaterMarks:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def _rows(spark: SparkSession, rows: int, values: int, tasks: int) -> DataFrame:
    df = taxi_rows(spark, 0, rows, partitions=tasks)
    return df.withColumn("part", F.pmod(F.xxhash64(*df.columns), F.lit(values)).cast("int"))


def _sink(root: Path, table: str, budget: int) -> IcebergSink:
    return IcebergSink.from_options(
        {
            "catalog.name": "bench",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root}/catalog.db",
            "catalog.warehouse": f"file://{root}/warehouse",
            "table": table,
            "partition-by": "part",
            "distribution-mode": "none",
            "write.fanout.memory-budget-bytes": str(budget),
            "sink-id": "bench-workers",
        }
    )


def run_setting(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """One setting in this process: warm-up, baselines, then the measured batch."""
    load_start = os.getloadavg()
    spark = _session(args.master)
    jvm_pid = _jvm_pid(spark)
    warm = _sink(root, "bench.warmup", args.budget)
    warm(_rows(spark, args.warmup_rows, args.partition_values, args.tasks), 0)
    warm.close()
    time.sleep(1)  # let the tasks' threads end and the allocators settle
    baselines = {pid: rss_bytes(pid) for pid in _workers(jvm_pid)}
    sink = _sink(root, "bench.workers", args.budget)
    df = _rows(spark, args.rows, args.partition_values, args.tasks)
    arrow_bytes_per_task = int(df.limit(10_000).toArrow().nbytes / 10_000 * args.rows / args.tasks)
    started = time.perf_counter()
    with _HighWaterMarks(jvm_pid, args.interval) as marks:
        sink(df, 0)
    seconds = time.perf_counter() - started
    gauges = {
        name: sink.metrics.registry.get_sample_value(name, {"table": "bench.workers"})
        for name in ("icesink_task_peak_rss_bytes", "icesink_buffered_bytes_max", "icesink_open_writers_max")
    }
    snapshot = sink.catalog.load_table("bench.workers").current_snapshot()
    files = snapshot.summary.get("added-data-files") if snapshot and snapshot.summary else None
    sink.close()
    spark.stop()
    overhead = max(baselines.values(), default=0)
    peak = max(marks.peaks.values(), default=0)
    return {
        "partition_values": args.partition_values,
        "budget_bytes": args.budget,
        "rows": args.rows,
        "tasks": args.tasks,
        "arrow_bytes_per_task": arrow_bytes_per_task,
        "seconds": round(seconds, 1),
        "worker_baseline_rss_bytes": baselines,
        "worker_peak_hwm_bytes": marks.peaks,
        "overhead_bytes": overhead,
        "peak_bytes": peak,
        "peak_above_baseline_bytes": max(
            (hwm - baselines.get(pid, overhead) for pid, hwm in marks.peaks.items()), default=0
        ),
        "within_budget_plus_overhead": peak <= args.budget + overhead,
        "sink_gauges": gauges,
        "data_files": int(files) if files is not None else None,
        "machine": _machine(load_start, os.getloadavg()),
    }


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / MIB:,.0f} MiB"


def markdown(results: list[dict[str, Any]]) -> str:
    """One row per setting, as in ``benchmarks/README.md``."""
    lines = [
        "| partition values | budget | Arrow bytes per task | worker baseline (overhead) | worker peak "
        "| peak - baseline | peak <= budget + overhead | in-task peak / buffered peak (sink's gauges) "
        "| open writers | files | load avg (start / end) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        g, m = r["sink_gauges"], r["machine"]
        lines.append(
            f"| {r['partition_values']:,} | {_mib(r['budget_bytes'])} | {_mib(r['arrow_bytes_per_task'])} "
            f"| {_mib(r['overhead_bytes'])} | {_mib(r['peak_bytes'])} "
            f"| {_mib(r['peak_above_baseline_bytes'])} "
            f"| {'yes' if r['within_budget_plus_overhead'] else '**no**'} "
            f"| {_mib(g['icesink_task_peak_rss_bytes'])} / {_mib(g['icesink_buffered_bytes_max'])} "
            f"| {g['icesink_open_writers_max']:,.0f} | {r['data_files']:,} "
            f"| {m['load_average_start'][0]} / {m['load_average_end'][0]} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=8_000_000, help="rows of the measured batch")
    p.add_argument("--warmup-rows", type=int, default=20_000)
    p.add_argument("--tasks", type=int, default=2, help="Spark partitions of the batch: its write tasks")
    p.add_argument("--partition-values", default=DEFAULT_VALUES, help="comma-separated")
    p.add_argument("--budgets", default=DEFAULT_BUDGETS, help="comma-separated, bytes")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between VmHWM samples")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--budget", type=int, help=argparse.SUPPRESS)  # a child: this one setting
    args = p.parse_args(argv)
    if args.budget is not None:
        args.partition_values = int(args.partition_values)
        with tempfile.TemporaryDirectory(prefix="icesink-workers-") as tmp:
            result = run_setting(args, Path(tmp))
        assert args.out is not None
        args.out.write_text(json.dumps(result, indent=2))
        return 0
    results = []
    with tempfile.TemporaryDirectory(prefix="icesink-workers-") as tmp:
        for values in args.partition_values.split(","):
            for budget in args.budgets.split(","):
                out = Path(tmp) / f"{values}-{budget}.json"
                command = [
                    sys.executable, "-m", "benchmarks.worker_memory", "--rows", str(args.rows),
                    "--warmup-rows", str(args.warmup_rows), "--tasks", str(args.tasks),
                    "--partition-values", values, "--budget", budget, "--master", args.master,
                    "--interval", str(args.interval), "--out", str(out),
                ]  # fmt: skip
                print(f"{values} values, budget {int(budget) / MIB:.0f} MiB", file=sys.stderr, flush=True)
                subprocess.run(command, check=True)
                results.append(json.loads(out.read_text()))
    print(markdown(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
