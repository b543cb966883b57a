"""``make demo-cluster``: the demo workload on a Spark cluster, through a REST catalog, onto S3.

Starts, on loopback and free ports, SeaweedFS (an S3 API and an Iceberg REST catalog whose
tables live in a table bucket) and a Spark standalone cluster (a Master and two 1-core
Workers from pyspark's wheel), streams the reference workload into ``demo.trips`` through
the sink with this process as the driver, prints what the table holds, and stops every
server it started, on success, error or Ctrl-C. Everything lives under
``<data-dir>/cluster`` and starts empty on each run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import SparkSession

from icesink import IcebergSink
from icesink.jobs.demo import print_report, stream_files
from icesink.jobs.local_servers.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS
from icesink.jobs.local_servers.spark_cluster import EXECUTOR_MEMORY, SparkCluster
from icesink.jobs.local_servers.spark_home import spark_environment
from icesink.jobs.spark import get_spark
from icesink.jobs.taxi_workload import PARTITION_BY, write_files

TABLE = "demo.trips"
WORKERS = 2


@contextlib.contextmanager
def local_servers(root: Path) -> Iterator[tuple[SeaweedFS, SparkCluster]]:
    """SeaweedFS and a two-worker cluster under ``root``, stopped when the block ends, however it ends."""
    seaweedfs = SeaweedFS(root / "seaweedfs")
    cluster = SparkCluster(root / "spark", workers=WORKERS)
    try:
        (root / "seaweedfs").mkdir(parents=True)
        started = time.perf_counter()
        seaweedfs.start()
        print(
            f"SeaweedFS        S3 {seaweedfs.s3_endpoint}, REST catalog {seaweedfs.catalog_uri}", flush=True
        )
        cluster.start()
        print(
            f"Spark cluster    {cluster.master_url}, {WORKERS} workers "
            f"(servers up in {time.perf_counter() - started:.1f} s)",
            flush=True,
        )
        yield seaweedfs, cluster
    finally:
        cluster.stop()
        seaweedfs.stop()
        print("servers stopped", flush=True)


def cluster_session(cluster: SparkCluster, root: Path) -> SparkSession:
    """This process as the cluster's driver, on loopback."""
    os.environ.update(spark_environment(root / "driver"))
    return get_spark(
        "icesink-demo-cluster",
        cluster.master_url,
        conf={
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "1",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
        },
    )


def sink_options(seaweedfs: SeaweedFS) -> dict[str, str]:
    """The sink on SeaweedFS's REST catalog; its own state in the plain bucket, outside the tables."""
    catalog = seaweedfs.rest_catalog_properties()
    return {
        "table": TABLE,
        "catalog.name": "rest",
        **{f"catalog.{key}": value for key, value in catalog.items()},
        "state-location": f"s3://{WAREHOUSE_BUCKET}/icesink-state",
        "partition-by": PARTITION_BY,
        "write.target-file-size-bytes": str(128 * 1024 * 1024),
    }


def run(seaweedfs: SeaweedFS, cluster: SparkCluster, root: Path, files: int, rows_per_file: int) -> None:
    """Generate the input, stream it through the sink, print what the table holds."""
    spark = cluster_session(cluster, root)
    try:
        print(f"generating {files} x {rows_per_file:,} taxi rows in {root / 'input'} ...", flush=True)
        source = write_files(spark, root / "input", files, rows_per_file)
        sink = IcebergSink.from_options(sink_options(seaweedfs))
        print(f"streaming into {TABLE} on the REST catalog (partition-by {PARTITION_BY}) ...", flush=True)
        elapsed = stream_files(spark, sink, source, root / "checkpoint")
        print_report(sink.catalog.load_table(TABLE), elapsed, files)
    finally:
        spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", default="demo-data", type=Path)
    parser.add_argument("--files", type=int, default=4, help="micro-batches (one input file each)")
    parser.add_argument("--rows-per-file", type=int, default=250_000)
    args = parser.parse_args(argv)

    root: Path = (args.data_dir / "cluster").resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    try:
        with local_servers(root) as (seaweedfs, cluster):
            run(seaweedfs, cluster, root, args.files, args.rows_per_file)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        return 130
    print(f"demo-cluster took {time.perf_counter() - started:.1f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
