"""With a 1 MiB target, files are full-sized except each partition's last one in a task."""

from __future__ import annotations

import re
from collections import defaultdict

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from tests.support.tables import data_files

MiB = 1024 * 1024
_NAME = re.compile(r"-(\d{5})-(\d+)-(\d{5})\.parquet$")


def test_one_mib_target(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {
        **catalog_options,
        "table": "db.sized",
        "sink-id": "sized",
        "partition-by": "bucket(2, id)",
        "distribution-mode": "hash",
        "write.target-file-size-bytes": str(MiB),
    }
    sink = IcebergSink.from_options(options)
    # Random doubles and hashes barely compress: about 12 MiB of Parquet in all.
    df = spark.range(0, 160_000, numPartitions=2).select(
        "id", F.rand(7).alias("r"), F.sha2(F.col("id").cast("string"), 256).alias("h")
    )
    sink(df, 0)
    table = sink.catalog.load_table("db.sized")
    files = data_files(table)
    assert table.scan().to_arrow().num_rows == 160_000
    groups: dict[tuple[object, str], list[tuple[int, int]]] = defaultdict(list)
    for f in files:
        match = _NAME.search(f.file_path)
        assert match, f.file_path
        groups[(f.partition[0], match.group(1))].append((int(match.group(3)), f.file_size_in_bytes))
    assert len(files) >= 8
    for sizes in groups.values():
        ordered = [size for _, size in sorted(sizes)]
        assert all(size <= 1.5 * MiB for size in ordered), ordered
        assert all(size >= 0.9 * MiB for size in ordered[:-1]), ordered


def test_thirty_two_mib_target_gives_consistent_files(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    target = 32 * MiB
    options = {
        **catalog_options,
        "table": "db.sized32",
        "sink-id": "sized32",
        "distribution-mode": "none",
        "write.target-file-size-bytes": str(target),
    }
    sink = IcebergSink.from_options(options)
    # About 330 MiB of Parquet over 2 tasks: several full files per task, then a tail each.
    df = spark.range(0, 2_600_000, numPartitions=2).select(
        "id",
        F.rand(11).alias("r"),
        F.sha2(F.col("id").cast("string"), 256).alias("h"),
        F.sha2(F.col("id").cast("string"), 512).alias("h2"),
    )
    sink(df, 0)
    table = sink.catalog.load_table("db.sized32")
    files = data_files(table)
    assert sum(f.record_count for f in files) == 2_600_000
    per_task: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for f in files:
        match = _NAME.search(f.file_path)
        assert match, f.file_path
        per_task[match.group(1)].append((int(match.group(3)), f.file_size_in_bytes))
    full = [size for sizes in per_task.values() for _, size in sorted(sizes)[:-1]]  # tails aside
    assert len(full) >= 6
    within = [size for size in full if 0.8 * target <= size <= 1.2 * target]
    assert len(within) >= 0.9 * len(full), sorted(size / MiB for size in full)
