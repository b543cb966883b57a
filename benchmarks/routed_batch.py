"""Where a routed micro-batch's time goes in the driver, without Kafka.

::

    .venv/bin/python -m benchmarks.routed_batch --tables 200 --rows 100000 --batches 4

One :class:`~sink.sink.IcebergSink` with ``route.by=field`` (SQLite catalog, local
warehouse) writes ``--batches`` batches of ``--rows`` rows made by ``spark.range``
(a destination column with ``--tables`` values, a long and a 64-character string), each
batch to every table. Prints each batch's seconds and a cProfile (cumulative) of the
last batch: the first batch creates the tables, the later ones are the steady state.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tables", type=int, default=200)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--top", type=int, default=40, help="profile lines to print")
    args = p.parse_args(argv)
    spark = _session(args.master)
    with tempfile.TemporaryDirectory(prefix="icesink-routed-") as tmp:
        sink = IcebergSink.from_options(
            {
                "catalog.name": "bench",
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{tmp}/catalog.db",
                "catalog.warehouse": f"file://{tmp}/warehouse",
                "sink-id": "routed-batch",
                "route.by": "field",
                "route.field": "topic",
                "route.table-template": "raw.{value}",
            }
        )
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
