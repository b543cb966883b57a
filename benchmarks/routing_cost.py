"""What the routing step (partition values and the shuffle) costs, and the files each mode makes.

On the reference workload (:mod:`icesink.jobs.taxi_workload`: 19 columns, partitioned
by ``day(tpep_pickup_datetime), bucket(16, PULocationID)``, 64 partition values), each
row below is one Spark job over the same generated rows, timed as the median of
``--repeats`` runs, taken round-robin so that a machine's drifting load hits all alike:

* ``router.route()``: the driver's time to build the routed plan (no Spark job);
* ``floor``: generate the rows and count them in ``mapInArrow`` (what any Python write
  pays: Spark to Arrow to a Python worker);
* ``+ partition columns``: the same with the partition-value columns added;
* ``+ shuffle <mode>``: the same after the router's shuffle for each ``distribution-mode``;
* ``sink write <mode>``: a whole :class:`~icesink.IcebergSink` batch into a new table (files
  written and committed), with the number of data files and the tasks that wrote them.

With ``--alternatives``, shuffles that were considered and rejected are timed too:
``repartition(16, bucket)`` (Spark's hash of the bucket id: not one bucket per task) and
RDD ``partitionBy`` with the bucket id as partition (exact, through Python; timed once). With
``--small-rows N``, a small batch is written once shuffled and once by a single task
(the router's skip rule). Run with::

    .venv/bin/python -m benchmarks.routing_cost --rows 1000000 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks._count_floor import count_rows
from icesink import DistributionMode, IcebergSink
from icesink.jobs.taxi_workload import PARTITION_BY, taxi_rows
from icesink.partitioning import build_partition_spec, parse_partition_by
from icesink.route.router import PARTITION_COLUMN_PREFIX, BucketRouter
from icesink.route.self_check_runs import ensure_self_checks
from icesink.route.skew import RoutingHistory
from icesink.type_mapping import spark_to_iceberg_schema

_FILE_NAME = re.compile(r"-(\d{5})-(\d+)-(\d{5})\.parquet$")
_MODES = (DistributionMode.BUCKET, DistributionMode.HASH, DistributionMode.NONE)
_NAIVE = "alt: repartition(16, bucket id)"


def _buckets_per_task(column: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        seen: set[Any] = set()
        for batch in batches:
            seen.update(pc.unique(batch.column(column)).to_pylist())
        yield pa.RecordBatch.from_pydict({"buckets": [len(seen)]})

    return run


class RoutingBenchmark:
    """The measurements, on one session and one set of generated rows."""

    def __init__(self, spark: SparkSession, rows: int, repeats: int, root: Path) -> None:
        self.spark = spark
        self.rows = rows
        self.repeats = repeats
        self.root = root
        self.source = taxi_rows(spark, 0, rows)
        schema = spark_to_iceberg_schema(self.source.schema)
        self.schema = schema
        self.spec = build_partition_spec(parse_partition_by(PARTITION_BY), schema)
        self.results: list[dict[str, Any]] = []

    def router(self, mode: DistributionMode, history: RoutingHistory | None = None) -> BucketRouter:
        return BucketRouter(self.spec, self.schema, mode, history=history, table_name="bench.taxi")

    def _record(self, step: str, seconds: float, **extra: Any) -> None:
        self.results.append({"step": step, "seconds": round(seconds, 2), **extra})
        print(f"  {step}: {seconds:.2f} s {extra or ''}", file=sys.stderr, flush=True)

    def _count_job(self, df: DataFrame) -> int:
        return sum(r["n"] for r in df.mapInArrow(count_rows, "n long").collect())

    def run_steps(self, writes: bool, alternatives: bool) -> None:
        """Every step and write, ``repeats`` times round-robin, so that drifting load hits all alike."""
        bucket_source = self.schema.find_field("PULocationID").field_type
        ensure_self_checks(self.spark, [bucket_source], shuffle=True)  # once, outside the timings
        start = time.perf_counter()
        routed = {mode: self.router(mode).route(self.source) for mode in _MODES}
        route_seconds = (time.perf_counter() - start) / len(_MODES)
        with_columns = self.router(DistributionMode.NONE).route(self.source).df
        jobs: list[tuple[str, Callable[[int], dict[str, Any]]]] = [
            ("floor: generate + mapInArrow count", self._counted(self.source)),
            ("+ partition columns", self._counted(with_columns)),
        ]
        jobs += [(f"+ shuffle {mode.value}", self._counted(routed[mode].df)) for mode in _MODES]
        bucket = f"{PARTITION_COLUMN_PREFIX}1"
        naive = with_columns.repartition(16, F.col(bucket))
        if alternatives:
            jobs.append((_NAIVE, self._counted(naive)))
        for _, job in jobs:
            job(-1)  # warm-up: code generation, Python workers
        if writes:
            for mode in _MODES:  # warm-up: the write path's imports in every Python worker
                self._write(taxi_rows(self.spark, 0, 5000), mode, f"warm-up-{mode.value}")
            jobs += [(f"sink write {mode.value}", partial(self._write_mode, mode)) for mode in _MODES]
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in jobs}
        for repeat in range(self.repeats):
            for name, job in jobs:
                runs[name].append(job(repeat))
        partitions = {
            DistributionMode.BUCKET: routed[DistributionMode.BUCKET].num_partitions,
            DistributionMode.HASH: "AQE-coalesced",
            DistributionMode.NONE: self.source.rdd.getNumPartitions(),  # no shuffle in this plan
        }
        self._record("router.route() on the driver (plan only)", route_seconds)
        for name, _ in jobs:
            last = runs[name][-1]
            extra = {k: v for k, v in last.items() if k != "seconds"}
            for mode in _MODES:
                if name == f"+ shuffle {mode.value}":
                    extra["partitions"] = partitions[mode]
            if name == _NAIVE:
                column = naive.columns.index(bucket)
                per_task = naive.mapInArrow(_buckets_per_task(column), "buckets long").collect()
                extra["tasks_with_rows"] = sum(1 for r in per_task if r["buckets"])
                extra["most_buckets_in_a_task"] = max(r["buckets"] for r in per_task)
            self._record(name, statistics.median(r["seconds"] for r in runs[name]), **extra)

    def _counted(self, df: DataFrame) -> Callable[[int], dict[str, Any]]:
        def run(repeat: int) -> dict[str, Any]:
            start = time.perf_counter()
            rows = self._count_job(df)
            assert rows == self.rows, rows
            return {"seconds": time.perf_counter() - start}

        return run

    def _write_mode(self, mode: DistributionMode, repeat: int) -> dict[str, Any]:
        return self._write(self.source, mode, f"{mode.value}{repeat}")

    def run_rdd_alternative(self) -> None:
        """RDD ``partitionBy`` by bucket id: exact, but every row goes through Python."""
        routed = self.router(DistributionMode.NONE).route(self.source)
        bucket = f"{PARTITION_COLUMN_PREFIX}1"
        position = routed.df.columns.index(bucket)
        schema = routed.df.schema

        def rdd_partition_by() -> int:
            pairs = routed.df.rdd.map(lambda row: (row[position], row))
            shuffled = pairs.partitionBy(16, lambda b: b).values()
            return self._count_job(self.spark.createDataFrame(shuffled, schema))

        start = time.perf_counter()
        assert rdd_partition_by() == self.rows  # a minute or more: once is enough to rule it out
        seconds = time.perf_counter() - start
        self._record("alt: rdd.partitionBy(16, bucket id)", seconds)

    def run_small(self, rows: int) -> None:
        small = taxi_rows(self.spark, 0, rows)
        # The second batch of a sink is written by one task when the first was small.
        shuffled, single = [], []
        for i in range(self.repeats):
            shuffled.append(self._write(small, DistributionMode.BUCKET, f"small{i}")["seconds"])
            single.append(self._write(small, DistributionMode.BUCKET, f"small{i}", batch_id=1)["seconds"])
        self._record(f"small batch ({rows} rows) bucket shuffle", statistics.median(shuffled))
        self._record(f"small batch ({rows} rows) single task", statistics.median(single))

    def _write(self, df: DataFrame, mode: DistributionMode, name: str, batch_id: int = 0) -> dict[str, Any]:
        options = {
            "catalog.name": "bench",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{self.root}/catalog-{name}.db",
            "catalog.warehouse": f"file://{self.root}/warehouse-{name}",
            "table": "bench.taxi",
            "sink-id": "routing-bench",
            "partition-by": PARTITION_BY,
            "distribution-mode": mode.value,
        }
        sink = _SINKS.get(name) or IcebergSink.from_options(options)
        _SINKS[name] = sink
        start = time.perf_counter()
        sink(df, batch_id)
        seconds = time.perf_counter() - start
        table = sink.catalog.load_table("bench.taxi")
        snapshot = table.current_snapshot()
        assert snapshot is not None
        files = [f.file for f in table.scan().plan_files() if f"-b{batch_id}-" in f.file.file_path]
        tasks = {m.group(1) for f in files if (m := _FILE_NAME.search(f.file_path))}
        return {"seconds": seconds, "files": len(files), "tasks": len(tasks)}


_SINKS: dict[str, IcebergSink] = {}


def _table(results: list[dict[str, Any]], floor: float) -> str:
    lines = [
        f"| {'step':<42} | {'median s':>8} | {'x floor':>7} | details |",
        f"|{'-' * 44}|{'-' * 10}|{'-' * 9}|---|",
    ]
    for r in results:
        extra = ", ".join(f"{k}={v}" for k, v in r.items() if k not in {"step", "seconds"} and v is not None)
        lines.append(f"| {r['step']:<42} | {r['seconds']:>8.2f} | {r['seconds'] / floor:>7.2f} | {extra} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--alternatives", action="store_true", help="also time the rejected shuffles")
    parser.add_argument(
        "--small-rows", type=int, default=0, help="also time a small batch, shuffled vs one task"
    )
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(args.master)
        .appName("icesink-routing-cost")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="icesink-routing-") as tmp:
        bench = RoutingBenchmark(spark, args.rows, args.repeats, Path(tmp))
        bench.run_steps(writes=not args.skip_writes, alternatives=args.alternatives)
        if args.alternatives:
            bench.run_rdd_alternative()
        if args.small_rows:
            bench.run_small(args.small_rows)
    floor = next(r["seconds"] for r in bench.results if r["step"].startswith("floor"))
    print(f"rows={args.rows} master={args.master} repeats={args.repeats} (median)")
    print(_table(bench.results, floor))
    if args.json:
        args.json.write_text(json.dumps({"rows": args.rows, "master": args.master, "results": bench.results}))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
