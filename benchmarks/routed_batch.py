"""Where a routed micro-batch's time goes in the driver, without Kafka.

::

    .venv/bin/python -m benchmarks.routed_batch --tables 200 --rows 100000 --batches 4

One :class:`~icesink.sink.IcebergSink` with ``route.by=field`` (SQLite catalog, local
warehouse) writes ``--batches`` batches of ``--rows`` rows made by ``spark.range``
(a destination column with ``--tables`` values, a long and a 64-character string), each
batch to every table. Prints each batch's seconds and a cProfile (cumulative) of the
last batch: the first batch creates the tables, the later ones are the steady state.

``--distribution-mode`` (repeatable) compares routed shuffles in one run: one sink per
mode, each in its own namespace, their batches taking turns, and prints each mode's
median steady-state batch (the first creates the tables) and the ratio to the first
mode's, e.g. ::

    .venv/bin/python -m benchmarks.routed_batch --tables 20 --rows 400000 --batches 4 \
        --partition-by 'bucket(8, v)' --distribution-mode none --distribution-mode bucket
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import tempfile
import time

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks._session import _session
from icesink import IcebergSink


def _batch(spark: SparkSession, rows: int, tables: int) -> DataFrame:
    return (
        spark.range(rows)
        .withColumn("topic", F.concat(F.lit("t"), (F.col("id") % tables).cast("string")))
        .withColumn("v", F.col("id") * 2)
        .withColumn("s", F.sha2(F.col("id").cast("string"), 256))
    )


def _sink(tmp: str, namespace: str, args: argparse.Namespace, mode: str | None) -> IcebergSink:
    options = {
        "catalog.name": "bench",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp}/catalog.db",
        "catalog.warehouse": f"file://{tmp}/warehouse",
        "sink-id": f"routed-batch-{namespace}",
        "route.by": "field",
        "route.field": "topic",
        "route.table-template": f"{namespace}.{{value}}",
    }
    if args.partition_by:
        options["partition-by"] = args.partition_by
    if mode is not None:
        options["distribution-mode"] = mode
    return IcebergSink.from_options(options)


def _compare(spark: SparkSession, tmp: str, args: argparse.Namespace) -> None:
    """Each mode's sink writes every batch, the modes taking turns; medians of the steady state."""
    modes = args.distribution_mode
    sinks = {mode: _sink(tmp, f"raw_{mode}", args, mode) for mode in modes}
    seconds: dict[str, list[float]] = {mode: [] for mode in modes}
    for batch_id in range(args.batches):
        for mode, sink in sinks.items():
            started = time.perf_counter()
            sink(_batch(spark, args.rows, args.tables), batch_id)
            seconds[mode].append(time.perf_counter() - started)
            print(f"{mode} batch {batch_id}: {seconds[mode][-1]:.2f} s", flush=True)
    files = {mode: _data_files(sink, f"raw_{mode}") for mode, sink in sinks.items()}
    for sink in sinks.values():
        sink.close()
    first = statistics.median(seconds[modes[0]][1:])
    for mode in modes:
        median = statistics.median(seconds[mode][1:])
        print(
            f"{mode}: median {median:.2f} s per batch, {median / first:.2f} x {modes[0]}; "
            f"{files[mode]} data files in its tables after {args.batches} batches"
        )


def _data_files(sink: IcebergSink, namespace: str) -> int:
    """The data files of every table of ``namespace``."""
    tables = sink.catalog.list_tables(namespace)
    return sum(len(list(sink.catalog.load_table(t).scan().plan_files())) for t in tables)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=200)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--top", type=int, default=40, help="profile lines to print")
    p.add_argument("--partition-by", default=None, help="every table's partition-by, e.g. 'bucket(8, v)'")
    p.add_argument("--distribution-mode", action="append", choices=["none", "hash", "bucket"])
    args = p.parse_args(argv)
    spark = _session(args.master)
    if args.distribution_mode:
        with tempfile.TemporaryDirectory(prefix="icesink-routed-") as tmp:
            _compare(spark, tmp, args)
        return 0
    with tempfile.TemporaryDirectory(prefix="icesink-routed-") as tmp:
        sink = _sink(tmp, "raw", args, None)
        profile = cProfile.Profile()
        with sink:
            for batch_id in range(args.batches):
                last = batch_id == args.batches - 1
                started = time.perf_counter()
                if last:
                    profile.enable()
                sink(_batch(spark, args.rows, args.tables), batch_id)
                if last:
                    profile.disable()
                print(f"batch {batch_id}: {time.perf_counter() - started:.2f} s", flush=True)
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
