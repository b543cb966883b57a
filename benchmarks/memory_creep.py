"""Driver memory over a long stream: does a query's resident memory grow with its batches?

::

    .venv/bin/python -m benchmarks.memory_creep --batches 500 --rows-per-batch 2000

One streaming query (``rate-micro-batch`` source, ``--rows-per-batch`` rows per batch, a
string payload and ``--partition-values`` identity partition values) into an
:class:`~icesink.sink.IcebergSink` (SQLite catalog, local warehouse, one commit per batch,
Prometheus metrics exported on a free port so their registry is part of the process),
with the documented maintenance (``expire_snapshots(retain_last=10)``) every
``--expire-every`` batches. After each batch the ``foreachBatch`` function records the
resident memory (``VmRSS``) of this Python process (the driver, where the sink runs) and
of the driver's JVM.

Reported: RSS after the warm-up (``--warmup`` batches) and at the end, the growth between
the two, and the least-squares slope over that stretch in MiB per 100 batches. Memory is
not timing: the figures do not depend on the machine's load, only on what is allocated
and kept.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from benchmarks._probes import rss_bytes
from benchmarks._session import _jvm_pid, _session
from icesink import IcebergSink, expire_snapshots

TABLE = "bench.creep"
MIB = 1024 * 1024


class _Recorder:
    """The ``foreachBatch`` function: the sink's batch, maintenance, then the processes' RSS."""

    def __init__(
        self,
        sink: IcebergSink,
        jvm_pid: int,
        expire_every: int,
        trace_at: int | None,
        trim: bool,
        noop: bool = False,
    ) -> None:
        self.sink = sink
        self.noop = noop
        self.trim = ctypes.CDLL("libc.so.6").malloc_trim if trim else None
        self.trace_at = trace_at
        self.traced: tracemalloc.Snapshot | None = None
        self.jvm_pid = jvm_pid
        self.expire_every = expire_every
        self.python_rss: list[int] = []
        self.jvm_rss: list[int] = []
        self.arrow_allocated: list[int] = []
        self.threads: list[int] = []

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        if self.noop:  # the control: the same query and batches, written by Spark's noop sink
            df.write.format("noop").mode("overwrite").save()
        else:
            self.sink(df, batch_id)
        if not self.noop and self.expire_every and (batch_id + 1) % self.expire_every == 0:
            expire_snapshots(self.sink.catalog.load_table(TABLE), retain_last=10)
        if self.trim is not None:
            self.trim(0)  # give the C heap's free pages back: what stays is in use
        self.python_rss.append(rss_bytes(os.getpid()))
        self.jvm_rss.append(rss_bytes(self.jvm_pid))
        self.arrow_allocated.append(pa.total_allocated_bytes())
        self.threads.append(threading.active_count())
        if self.trace_at is not None and len(self.python_rss) == self.trace_at:
            self.traced = tracemalloc.take_snapshot()


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    spark = _session(args.master)
    sink = IcebergSink.from_options(
        {
            "catalog.name": "bench",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root}/catalog.db",
            "catalog.warehouse": f"file://{root}/warehouse",
            "table": TABLE,
            "partition-by": "part",
            "distribution-mode": "none",
            "metrics.port": "0",
        }
    )
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", args.rows_per_batch)
        .option("numPartitions", 2)
        .load()
        .select(
            F.col("value").alias("id"),
            F.col("timestamp").alias("ts"),
            (F.col("value") % args.partition_values).cast("int").alias("part"),
            F.sha2(F.col("value").cast("string"), 256).alias("payload"),
        )
    )
    if args.trace:
        tracemalloc.start(args.trace)
    trace_at = args.warmup if args.trace else None
    recorder = _Recorder(sink, _jvm_pid(spark), args.expire_every, trace_at, args.malloc_trim, args.noop)
    query = (
        stream.writeStream.foreachBatch(recorder)
        .option("checkpointLocation", str(root / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        while len(recorder.python_rss) < args.batches and query.isActive:
            query.awaitTermination(1)
    finally:
        query.stop()
        sink.close()
    if query.exception() is not None:
        raise RuntimeError(f"the query failed: {query.exception()}")
    batches = min(len(recorder.python_rss), args.batches)
    if recorder.traced is not None:
        _print_growth(recorder.traced, tracemalloc.take_snapshot())
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        | {"batches_done": batches},
        "python": _growth(recorder.python_rss[:batches], args.warmup),
        "jvm": _growth(recorder.jvm_rss[:batches], args.warmup),
        "arrow_allocated": _growth(recorder.arrow_allocated[:batches], args.warmup),
        "python_threads": [recorder.threads[args.warmup - 1], recorder.threads[batches - 1]],
        "malloc_arena_max": os.environ.get("MALLOC_ARENA_MAX"),
        "malloc_trim": args.malloc_trim,
        "writer": "noop" if args.noop else "icesink",
    }


def _growth(rss: list[int], warmup: int) -> dict[str, Any]:
    """RSS after the warm-up and at the end, their difference and the slope between (MiB)."""
    stretch = rss[warmup - 1 :]
    xs = list(range(len(stretch)))
    slope = statistics.linear_regression(xs, stretch).slope if len(stretch) > 1 else 0.0
    return {
        "after_warmup_mib": round(stretch[0] / MIB, 1),
        "end_mib": round(stretch[-1] / MIB, 1),
        "growth_mib": round((stretch[-1] - stretch[0]) / MIB, 1),
        "max_mib": round(max(stretch) / MIB, 1),
        "slope_mib_per_100_batches": round(slope * 100 / MIB, 2),
        "every_100_batches_mib": [round(rss[i] / MIB, 1) for i in range(99, len(rss), 100)],
    }


def _print_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 25) -> None:
    """The allocations that grew most since the warm-up, by where they were made (to stderr)."""
    for diff in after.compare_to(before, "traceback")[:top]:
        print(f"{diff.size_diff / 1024:+.0f} KiB in {diff.count_diff:+d} blocks:", file=sys.stderr)
        for line in diff.traceback.format(limit=8, most_recent_first=True):
            print(f"    {line}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batches", type=int, default=500)
    p.add_argument("--rows-per-batch", type=int, default=2000)
    p.add_argument("--partition-values", type=int, default=64)
    p.add_argument("--expire-every", type=int, default=50, help="0: never expire snapshots")
    p.add_argument("--warmup", type=int, default=50, help="batches before the growth is measured")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--noop", action="store_true", help="the control: Spark's noop sink instead of icesink")
    p.add_argument(
        "--malloc-trim", action="store_true",
        help="call glibc's malloc_trim(0) after each batch: tells retained free memory from memory in use",
    )  # fmt: skip
    p.add_argument(
        "--trace", type=int, default=0, metavar="FRAMES",
        help="trace Python allocations (tracemalloc, this many frames) and print what grew after the warm-up",
    )  # fmt: skip
    p.add_argument("--out", type=Path, help="write the result as JSON here")
    args = p.parse_args(argv)
    if not 0 < args.warmup < args.batches:
        p.error("--warmup must be between 1 and --batches")
    with tempfile.TemporaryDirectory(prefix="icesink-creep-") as tmp:
        result = run(args, Path(tmp))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
