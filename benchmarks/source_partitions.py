"""Where a file source puts a micro-batch's rows, and what knowing it costs.

::

    .venv/bin/python -m benchmarks.source_partitions --rows 1000000 --batches 3 --repeats 3

Streams the reference workload's files (one row group each, as ``benchmarks.run``
writes them) with ``maxFilesPerTrigger=1`` on ``local[2]``, and in each micro-batch
counts the rows of every Spark partition, then times a count of the batch through
``mapInArrow`` (the hand-off every write task pays) in each of these forms:

* ``plain``: the batch as it is;
* ``coalesce``: ``coalesce(1)``, one task reading every partition;
* ``column+coalesce``: with ``spark_partition_id()`` as a last column, then ``coalesce(1)``
  (what the router hands a batch after one whose rows came from one partition);
* ``observe+coalesce``: ``coalesce(1)`` with ``Dataset.observe`` of the minimum and
  maximum ``spark_partition_id()`` instead of a column;
* ``count-first``: a Spark job counting the rows per partition before the batch is read.

The first micro-batch warms the JVM and is left out of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from benchmarks._count_floor import count_rows
from icesink.jobs.spark import get_spark
from icesink.jobs.taxi_workload import write_files


def _counted(df: DataFrame) -> None:
    df.mapInArrow(count_rows, "n long").collect()


def _observed(batch: DataFrame) -> None:
    seen = Observation("source_partitions")
    tagged = batch.select("*", F.spark_partition_id().alias("_p"))
    _counted(tagged.observe(seen, F.min("_p"), F.max("_p")).drop("_p").coalesce(1))
    assert seen.get  # the metrics arrived


def _rows_per_partition(batch: DataFrame) -> dict[int, int]:
    counts = batch.select(F.spark_partition_id().alias("p")).groupBy("p").count().collect()
    return {int(r["p"]): int(r["count"]) for r in counts}


FORMS: dict[str, Callable[[DataFrame], object]] = {
    "plain": _counted,
    "coalesce": lambda b: _counted(b.coalesce(1)),
    "column+coalesce": lambda b: _counted(b.select("*", F.spark_partition_id().alias("_p")).coalesce(1)),
    "observe+coalesce": _observed,
    "count-first": _rows_per_partition,
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    spark = get_spark("icesink-source-partitions", master="local[2]", conf={"spark.ui.enabled": "false"})
    source = write_files(spark, args.workdir / f"input-{args.batches}x{args.rows}", args.batches, args.rows)
    schema = spark.read.parquet(str(source)).schema
    seconds: dict[str, list[float]] = {name: [] for name in FORMS}

    def measure(batch: DataFrame, batch_id: int) -> None:
        shares = sorted(_rows_per_partition(batch).values(), reverse=True)
        partitions = batch.rdd.getNumPartitions()
        print(f"batch {batch_id}: {partitions} Spark partitions, rows of those with any: {shares}")
        for _ in range(args.repeats):
            for name, form in FORMS.items():
                started = time.perf_counter()
                form(batch)
                if batch_id > 0:
                    seconds[name].append(time.perf_counter() - started)

    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(source))
    with tempfile.TemporaryDirectory() as checkpoint:
        query = stream.writeStream.foreachBatch(measure).option("checkpointLocation", checkpoint).start()
        query.processAllAvailable()
        query.stop()
    print("| form | median s | runs |")
    print("|---|---|---|")
    for name, runs in seconds.items():
        print(f"| {name} | {statistics.median(runs):.3f} | {len(runs)} |")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000, help="rows per input file (one micro-batch)")
    p.add_argument("--batches", type=int, default=3, help="input files; the first warms up")
    p.add_argument("--repeats", type=int, default=3, help="times each form runs per batch")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/icesink-bench-source-partitions"))
    return p


if __name__ == "__main__":
    raise SystemExit(main())
