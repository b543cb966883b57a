"""``make demo``: stream the reference workload into a local Iceberg table and show the result.

Embedded default: Spark ``local[*]``, pyiceberg's SQL catalog on SQLite, a warehouse
folder on local disk, all under ``./demo-data``. Each run starts from an empty table
(the generated input is kept between runs).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import pyarrow.compute as pc
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink import IcebergSink
from icesink.jobs.spark import get_spark
from icesink.jobs.taxi_workload import PARTITION_BY, write_files

TABLE = "demo.trips"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="demo-data", type=Path)
    parser.add_argument("--files", type=int, default=4, help="micro-batches (one input file each)")
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args(argv)

    root: Path = args.data_dir.resolve()
    for stale in ("warehouse", "checkpoint", "catalog.db"):
        path = root / stale
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    (root / "warehouse").mkdir(parents=True)

    spark = get_spark("icesink-demo", args.master)
    print(f"generating {args.files} x {args.rows_per_file:,} taxi rows in {root / 'input'} ...", flush=True)
    source = write_files(spark, root / "input", args.files, args.rows_per_file)

    sink = local_sink(root, TABLE, {"write.target-file-size-bytes": str(128 * 1024 * 1024)})
    print(f"streaming into {TABLE} (partition-by {PARTITION_BY}) ...", flush=True)
    elapsed = stream_files(spark, sink, source, root / "checkpoint")

    print_report(sink.catalog.load_table(TABLE), elapsed, args.files)
    spark.stop()
    return 0


def local_sink(root: Path, table: str, options: dict[str, str] | None = None) -> IcebergSink:
    """A sink for ``table`` partitioned as the taxi workload, on the embedded default under ``root``.

    pyiceberg's SQL catalog on SQLite (``root/catalog.db``) and a warehouse folder on local
    disk (``root/warehouse``); ``options`` adds or overrides sink options.
    """
    return IcebergSink.from_options(
        {
            "table": table,
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root / 'catalog.db'}",
            "catalog.warehouse": f"file://{root / 'warehouse'}",
            "partition-by": PARTITION_BY,
            **(options or {}),
        }
    )


def stream_files(spark: SparkSession, sink: IcebergSink, source: Path, checkpoint: Path) -> float:
    """Stream the Parquet files of ``source`` through ``sink``, one per micro-batch; the seconds taken.

    The sink is closed once the query ends: that commits its last staged batches now (the
    query's end reaches its listener only later) and stops its metrics.
    """
    schema = spark.read.parquet(str(source)).schema
    sink.prepare(schema)
    started = time.perf_counter()
    with sink:
        query = (
            spark.readStream.schema(schema)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source))
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return time.perf_counter() - started


def print_report(table: Table, elapsed_s: float, batches: int) -> None:
    """What the stream wrote, read back from the table: rows, files, snapshots, rows per day."""
    files = [task.file for task in table.scan().plan_files()]
    rows = sum(f.record_count for f in files)
    sizes = sorted(f.file_size_in_bytes for f in files)
    snapshot = table.current_snapshot()
    print()
    print(f"rows written     {rows:,}")
    print(f"elapsed          {elapsed_s:.1f} s  ({rows / elapsed_s:,.0f} rows/s, {batches} micro-batches)")
    print(
        f"data files       {len(files)}  (min {sizes[0] / 1e6:.2f} MB, "
        f"median {sizes[len(sizes) // 2] / 1e6:.2f} MB, max {sizes[-1] / 1e6:.2f} MB)"
    )
    print(f"snapshots        {len(table.snapshots())}")
    if snapshot is not None and snapshot.summary is not None:
        summary = snapshot.summary
        print(
            f"current snapshot {snapshot.snapshot_id}  ({summary.operation.value}, "
            f"total-records {summary['total-records']}, total-data-files {summary['total-data-files']})"
        )
    print(f"table location   {table.location()}")
    days = table.scan(selected_fields=("tpep_pickup_datetime",)).to_arrow().column(0)
    counts = pc.value_counts(pc.strftime(days, "%Y-%m-%d", locale="C"))
    print("rows per pickup day (read back):")
    for entry in sorted(counts.to_pylist(), key=lambda e: e["values"]):
        print(f"  {entry['values']}  {entry['counts']:>10,}")


if __name__ == "__main__":
    raise SystemExit(main())
