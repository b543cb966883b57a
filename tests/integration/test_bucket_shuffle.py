"""The bucket shuffle, read back from the files: which task wrote which partition values.

A data file's name carries the batch id and the Spark partition id of the task that
wrote it (``...-b{batch}-{attempt}-{task:05d}-{task attempt}-{seq:05d}.parquet``), and
its manifest entry carries its partition tuple, so the table itself shows what every
write task received.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import DecimalType
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink, SelfCheckError
from icesink.jobs.taxi_workload import PARTITION_BY, taxi_rows, write_files
from icesink.route import router, self_check, self_check_runs
from icesink.route.self_check import HashVector
from icesink.route.transforms import partition_value_column
from icesink.write.layout import BucketLayout
from tests.support.parquet_streams import stream_parquet_folder
from tests.support.spark_conf import session_conf
from tests.support.tables import check_data_files, data_files

KiB = 1024
_NAME = re.compile(r"-b(\d+)-[0-9a-f]+-(\d{5})-(\d+)-(\d{5})\.parquet$")
TAXI_ROWS = 12_000
TAXI_INPUT_PARTITIONS = 3
TAXI_VALUES = 64  # 4 days x bucket(16)


@dataclass(frozen=True)
class Written:
    """One data file as the table records it, with the task that wrote it."""

    batch: int
    task: int
    seq: int
    partition: tuple[Any, ...]
    records: int
    size: int


def written(table: Table, batch: int | None = None) -> list[Written]:
    files = []
    for f in data_files(table):
        match = _NAME.search(f.file_path)
        assert match, f.file_path
        files.append(
            Written(
                batch=int(match.group(1)),
                task=int(match.group(2)),
                seq=int(match.group(4)),
                partition=tuple(f.partition),
                records=f.record_count,
                size=f.file_size_in_bytes,
            )
        )
    return [f for f in files if batch is None or f.batch == batch]


def by_task(files: list[Written]) -> dict[int, list[Written]]:
    tasks: dict[int, list[Written]] = defaultdict(list)
    for f in files:
        tasks[f.task].append(f)
    return tasks


def tasks_by_bucket(files: list[Written], bucket_of: Callable[[Written], Any]) -> dict[Any, set[int]]:
    """The tasks that wrote each bucket's files: one each, when every bucket was read by one task."""
    tasks: dict[Any, set[int]] = defaultdict(set)
    for f in files:
        tasks[bucket_of(f)].add(f.task)
    return tasks


def sink_for(catalog_options: dict[str, str], name: str, **options: str) -> IcebergSink:
    return IcebergSink.from_options({**catalog_options, "table": f"db.{name}", "sink-id": name, **options})


@pytest.mark.parametrize("advisory", ["1b", "1g"], ids=["tiny-advisory", "huge-advisory"])
def test_every_task_writes_exactly_its_bucket_under_aqe(
    spark: SparkSession, catalog_options: dict[str, str], advisory: str
) -> None:
    """Partition i receives exactly bucket i, however AQE is told to size partitions."""
    aqe = {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": advisory,
        "spark.sql.shuffle.partitions": "7",
    }
    sink = sink_for(catalog_options, "aqe", **{"partition-by": PARTITION_BY})  # bucket mode by default
    with session_conf(spark, aqe):
        sink(taxi_rows(spark, 0, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 0)
        assert spark.conf.get("spark.sql.adaptive.advisoryPartitionSizeInBytes") == advisory
    table = sink.catalog.load_table("db.aqe")
    files = written(table)
    # 16 shuffle partitions, read by two tasks per core, each reading whole buckets.
    assert {f.task for f in files} == set(range(min(16, 2 * spark.sparkContext.defaultParallelism)))
    buckets = tasks_by_bucket(files, lambda f: f.partition[1])
    assert sorted(buckets) == list(range(16)) and all(len(t) == 1 for t in buckets.values()), buckets
    # Under the target size: one file per partition value of the batch.
    assert len(files) == len({f.partition for f in files}) == TAXI_VALUES
    assert sum(f.records for f in files) == TAXI_ROWS == table.scan().to_arrow().num_rows


@pytest.mark.parametrize(
    ("mode", "expected_files"),
    [("hash", TAXI_VALUES), ("none", TAXI_INPUT_PARTITIONS * TAXI_VALUES)],
)
def test_reference_workload_files_per_mode(
    spark: SparkSession, catalog_options: dict[str, str], mode: str, expected_files: int
) -> None:
    """Versus the 64 files of the bucket shuffle (above): hash also 64, none tasks x values."""
    sink = sink_for(
        catalog_options, f"modes_{mode}", **{"partition-by": PARTITION_BY, "distribution-mode": mode}
    )
    sink(taxi_rows(spark, 0, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 0)
    table = sink.catalog.load_table(f"db.modes_{mode}")
    files = written(table)
    assert len(files) == expected_files
    assert sum(f.records for f in files) == TAXI_ROWS


def test_two_bucket_fields_and_nulls(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    """Two bucket fields combine into one partition id; null has a task of its own."""
    df = spark.range(0, 3000, numPartitions=2).select(
        "id",
        F.when(F.col("id") % 7 == 0, None).otherwise((F.col("id") * 31 % 1009).cast("int")).alias("i"),
        F.when(F.col("id") % 11 == 0, None).otherwise(F.concat(F.lit("s"), F.col("id") % 97)).alias("s"),
    )
    sink = sink_for(catalog_options, "two", **{"partition-by": "bucket(2, i), bucket(3, s)"})
    sink(df, 0)
    table = sink.catalog.load_table("db.two")
    layout = BucketLayout.for_spec(table.spec(), table.schema())
    assert layout is not None and layout.num_partitions == 3 * 4  # each field: its buckets + null
    files = written(table)
    assert len({f.partition for f in files}) == len(files) == 12
    buckets = tasks_by_bucket(files, lambda f: layout.partition_of(f.partition))
    assert all(len(t) == 1 for t in buckets.values()), buckets
    assert sum(f.records for f in files) == 3000
    assert check_data_files(table) == 12


def skewed(spark: SparkSession, start: int, rows: int) -> DataFrame:
    """80% of the rows have k = 7 (one bucket of bucket(4, k)); the rest spread over all buckets."""
    return spark.range(start, start + rows, numPartitions=2).select(
        "id",
        F.when(F.col("id") % 5 == 0, F.col("id") % 97).otherwise(7).cast("int").alias("k"),
        F.rand(3).alias("r"),
        F.sha2(F.col("id").cast("string"), 256).alias("h"),
    )


def test_hot_bucket_is_spread_over_several_tasks(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    target = 512 * KiB
    rows = 80_000
    options = {"partition-by": "bucket(4, k)", "write.target-file-size-bytes": str(target)}
    sink = sink_for(catalog_options, "skew", **options)
    sink(skewed(spark, 0, rows), 0)
    sink(skewed(spark, rows, rows), 1)
    table = sink.catalog.load_table("db.skew")
    assert table.scan().to_arrow().num_rows == 2 * rows
    records: dict[tuple[Any, ...], int] = defaultdict(int)
    for f in written(table):
        records[f.partition] += f.records
    hot = max(records, key=records.__getitem__)

    # Batch 0 went into an empty table: no bytes-per-row estimate yet, so no split.
    first = [f for f in written(table, 0) if f.partition == hot]
    assert len({f.task for f in first}) == 1

    # Batch 1: the first batch's files showed the hot bucket; its rows were counted and spread.
    files = written(table, 1)
    hot_files = [f for f in files if f.partition == hot]
    assert sum(f.records for f in hot_files) >= 0.8 * rows
    hot_tasks = by_task(hot_files)
    assert len(hot_tasks) >= 2, hot_tasks
    for task, task_files in hot_tasks.items():
        assert all(f.partition == hot for f in by_task(files)[task]), task  # one bucket per task
        sizes = sorted((f.size for f in task_files), reverse=True)
        assert sizes[0] >= 0.9 * target, (task, sizes)  # every share makes at least one full file
        assert all(size >= 0.9 * target for size in sizes[:-1]), (task, sizes)  # and one tail at most
    # The other buckets are not split: one task each (a task per shuffle partition when a
    # value is split), one file each (they are under the target).
    for f in files:
        if f.partition != hot:
            assert f.task == f.partition[0] and sum(1 for g in files if g.partition == f.partition) == 1


def test_batch_after_a_small_batch_is_written_by_one_task(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = sink_for(catalog_options, "small", **{"partition-by": PARTITION_BY})
    sink(taxi_rows(spark, 0, 2000, partitions=TAXI_INPUT_PARTITIONS), 0)
    sink(taxi_rows(spark, 2000, 2000, partitions=TAXI_INPUT_PARTITIONS), 1)
    table = sink.catalog.load_table("db.small")
    shuffled, single = written(table, 0), written(table, 1)
    buckets = tasks_by_bucket(shuffled, lambda f: f.partition[1])  # batch 0: the bucket shuffle
    assert len(buckets) == 16 and all(len(t) == 1 for t in buckets.values())
    assert {f.task for f in single} == {0}  # batch 1: one task, no shuffle
    assert len(single) == len({f.partition for f in single})  # still one file per value
    assert sum(f.records for f in single) == 2000


def test_a_batch_after_one_whose_rows_came_from_one_spark_partition_is_written_by_one_task(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    # Above the target in total, so the small-batch rule stays out; under it per value.
    options = {"partition-by": PARTITION_BY, "write.target-file-size-bytes": str(64 * KiB)}
    sink = sink_for(catalog_options, "one_source", **options)

    def in_one_partition(start: int) -> DataFrame:
        """Three Spark partitions, every row in the first, as a file source gives a file
        of one row group: the other byte ranges hold none."""
        rows = taxi_rows(spark, start, TAXI_ROWS, partitions=1)
        return rows.union(taxi_rows(spark, start, TAXI_ROWS, partitions=2).where("VendorID < 0"))

    sink(in_one_partition(0), 0)  # nothing known yet: shuffled
    sink(in_one_partition(TAXI_ROWS), 1)  # one task
    sink(taxi_rows(spark, 2 * TAXI_ROWS, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 2)  # one task still
    sink(taxi_rows(spark, 3 * TAXI_ROWS, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 3)  # shuffled again
    table = sink.catalog.load_table("db.one_source")
    assert table.scan().to_arrow().num_rows == 4 * TAXI_ROWS
    for batch, shuffled in [(0, True), (1, False), (2, False), (3, True)]:
        files = written(table, batch)
        assert sum(f.records for f in files) == TAXI_ROWS
        assert len(files) == len({f.partition for f in files}) == TAXI_VALUES  # one file per value
        buckets = tasks_by_bucket(files, lambda f: f.partition[1])
        assert all(len(t) == 1 for t in buckets.values())
        assert (len({f.task for f in files}) > 1) is shuffled, (batch, {f.task for f in files})


@pytest.mark.parametrize("budget_mib", [512, 1], ids=["held", "budget-too-small"])
def test_on_two_cores_a_batch_one_task_holds_is_written_by_one_task(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch, budget_mib: int
) -> None:
    """Past the first batch, on ``local[2]``, one task writes the rows it can hold: the same files.

    The small-batch line is set to nothing, so only the two-core rule can keep the shuffle
    out; a budget of 1 MiB cannot hold the 12,000 rows (about 1.7 MB of Arrow), and the
    shuffle stays.
    """
    monkeypatch.setattr(router, "SINGLE_TASK_MAX_BYTES", 0)
    options = {"partition-by": PARTITION_BY, "write.fanout.memory-budget-bytes": str(budget_mib * 2**20)}
    sink = sink_for(catalog_options, f"two_cores_{budget_mib}", **options)
    sink(taxi_rows(spark, 0, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 0)  # nothing known: shuffled
    sink(taxi_rows(spark, TAXI_ROWS, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 1)
    table = sink.catalog.load_table(f"db.two_cores_{budget_mib}")
    for batch, shuffled in [(0, True), (1, budget_mib == 1)]:
        files = written(table, batch)
        assert sum(f.records for f in files) == TAXI_ROWS
        assert len(files) == len({f.partition for f in files}) == TAXI_VALUES  # one file per value
        assert (len({f.task for f in files}) > 1) is shuffled, (batch, {f.task for f in files})
    assert table.scan().to_arrow().num_rows == 2 * TAXI_ROWS
    assert check_data_files(table) == 2 * TAXI_VALUES  # every row's partition value is its file's


def test_none_mode_writes_a_batch_one_task_holds_in_one_task(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``none`` past its first batch, on ``local[2]``: one task, one file per value instead of one per
    value and source task; every row back, each in its value's file."""
    monkeypatch.setattr(router, "SINGLE_TASK_MAX_BYTES", 0)  # only the two-core rule applies,
    monkeypatch.setattr(router, "DRIVER_MAX_BYTES", 0)  # in a task (the driver does not tell row widths)
    options = {"partition-by": PARTITION_BY, "distribution-mode": "none"}
    sink = sink_for(catalog_options, "none_one_task", **options)
    for batch in range(3):
        sink(taxi_rows(spark, batch * TAXI_ROWS, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), batch)
    table = sink.catalog.load_table("db.none_one_task")
    for batch, tasks in [(0, TAXI_INPUT_PARTITIONS), (1, 1), (2, 1)]:
        files = written(table, batch)
        assert len({f.task for f in files}) == tasks, (batch, {f.task for f in files})
        assert len(files) == tasks * TAXI_VALUES and len({f.partition for f in files}) == TAXI_VALUES
        assert sum(f.records for f in files) == TAXI_ROWS
    sizes = [sum(f.size for f in written(table, batch)) for batch in range(3)]
    assert sizes[1] < sizes[0] and sizes[2] < sizes[0], sizes  # the same rows in a third of the files
    assert table.scan().to_arrow().num_rows == 3 * TAXI_ROWS
    assert (
        check_data_files(table) == (TAXI_INPUT_PARTITIONS + 2) * TAXI_VALUES
    )  # each row in its value's file


@pytest.mark.parametrize("mode", ["bucket", "none"])
@pytest.mark.parametrize("budget_mib", [512, 1], ids=["held", "budget-too-small"])
def test_a_first_batch_of_files_one_task_holds_is_written_by_one_task(
    spark: SparkSession, catalog_options: dict[str, str], tmp_path: Path, mode: str, budget_mib: int
) -> None:
    """A stream's first micro-batch from a file source, on ``local[2]``: its plan knows the
    bytes of its files, and when one task holds them (guessed as Arrow) that task writes every
    value once, as the shuffle would and where ``none`` would write one file per value and
    source task. A budget of 1 MiB cannot hold the files' (about 0.4 MB) rows: distributed."""
    source = write_files(spark, tmp_path / "input", TAXI_INPUT_PARTITIONS, TAXI_ROWS // TAXI_INPUT_PARTITIONS)
    name = f"first_files_{mode}_{budget_mib}"
    options = {
        "partition-by": PARTITION_BY,
        "distribution-mode": mode,
        "write.fanout.memory-budget-bytes": str(budget_mib * 2**20),
    }
    sink = sink_for(catalog_options, name, **options)
    stream_parquet_folder(spark, source, sink, tmp_path / "checkpoint")
    table = sink.catalog.load_table(f"db.{name}")
    files = written(table, 0)
    assert sum(f.records for f in files) == TAXI_ROWS == table.scan().to_arrow().num_rows
    assert len({f.partition for f in files}) == TAXI_VALUES
    if budget_mib == 512:
        assert {f.task for f in files} == {0} and len(files) == TAXI_VALUES  # one task, one file a value
    else:
        assert len({f.task for f in files}) > 1, {f.task for f in files}
    assert check_data_files(table) == len(files)  # every row's partition value is its file's


def assert_nothing_written(table: Table) -> None:
    """A batch that failed its self-checks: no snapshot, and no data file on disk."""
    assert table.current_snapshot() is None
    data = Path(table.location().removeprefix("file://")) / "data"
    assert not data.exists() or not any(p.is_file() for p in data.rglob("*"))


def fresh_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No self-check passed yet, as in a new Spark application."""
    monkeypatch.setattr(self_check_runs, "_checked", set())


def _join_self_checks_started_ahead() -> None:
    for thread in threading.enumerate():
        if thread.name == "icesink-self-checks":
            thread.join(timeout=300)


# Spark computes the partition values of a bucket on a decimal (the write tasks cannot),
# so its batches wait for the bucket hash check, and a failed check fails them.
WRONG_DECIMAL = HashVector(DecimalType(9, 2), "CAST(14.20 AS DECIMAL(9,2))", -500754588)  # spec: ...589


def decimals(spark: SparkSession, rows: int) -> DataFrame:
    return spark.range(rows, numPartitions=2).select("id", (F.col("id") / 4).cast("decimal(9,2)").alias("d"))


def test_bucket_hash_self_check_failure_fails_the_batch_loudly(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(self_check, "BUCKET_HASH_VECTORS", (WRONG_DECIMAL,))
    fresh_checks(monkeypatch)
    sink = sink_for(catalog_options, "selfcheck", **{"partition-by": "bucket(4, d)"})
    with pytest.raises(SelfCheckError, match="-500754588"):
        sink(decimals(spark, 10), 0)
    assert_nothing_written(sink.catalog.load_table("db.selfcheck"))


def test_prepare_runs_the_self_checks_the_first_batch_would(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_checks(monkeypatch)
    sink = sink_for(catalog_options, "ahead", **{"partition-by": "bucket(4, d)"})
    sink.prepare(decimals(spark, 10).schema)  # starts them on a thread, and returns
    _join_self_checks_started_ahead()
    assert {path for _, path in self_check_runs._checked} == {"decimal", "exact shuffle"}

    def again(*args: object) -> None:
        raise AssertionError("the first batch ran a self-check again")

    monkeypatch.setattr(self_check, "verify_bucket_function", again)
    monkeypatch.setattr(self_check, "verify_partition_keys", again)
    sink(decimals(spark, 100), 0)  # the bucket shuffle: it needs both checks
    assert len(sink.catalog.load_table("db.ahead").scan().to_arrow()) == 100


def test_self_checks_that_fail_before_the_first_batch_fail_that_batch(
    spark: SparkSession,
    catalog_options: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(self_check, "BUCKET_HASH_VECTORS", (WRONG_DECIMAL,))
    fresh_checks(monkeypatch)
    sink = sink_for(catalog_options, "aheadfails", **{"partition-by": "bucket(4, d)"})
    with caplog.at_level(logging.WARNING):
        sink.prepare(decimals(spark, 10).schema)  # a failure there is only logged
        _join_self_checks_started_ahead()
    assert "self-checks started before the first batch failed" in caplog.text and "-500754588" in caplog.text

    with pytest.raises(SelfCheckError, match="-500754588"):
        sink(decimals(spark, 10), 0)
    assert_nothing_written(sink.catalog.load_table("db.aheadfails"))


def test_no_self_check_runs_when_the_tasks_compute_the_values(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bucket on a long: the tasks compute the values, Spark's bucket ids only choose the task."""
    fresh_checks(monkeypatch)
    ran: list[str] = []  # also what a thread started by prepare() ran, whose errors are only logged

    def never(*args: object) -> None:
        ran.append("a self-check")
        raise AssertionError("a self-check ran")

    monkeypatch.setattr(self_check, "verify_bucket_function", never)
    monkeypatch.setattr(self_check, "verify_partition_keys", never)
    sink = sink_for(catalog_options, "nocheck", **{"partition-by": PARTITION_BY})
    sink.prepare(taxi_rows(spark, 0, 10).schema)
    _join_self_checks_started_ahead()
    sink(taxi_rows(spark, 0, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 0)
    assert ran == []
    table = sink.catalog.load_table("db.nocheck")
    files = written(table)
    assert len(files) == len({f.partition for f in files}) == TAXI_VALUES  # the bucket shuffle's files
    assert all(len(t) == 1 for t in tasks_by_bucket(files, lambda f: f.partition[1]).values())
    assert check_data_files(table) == TAXI_VALUES and not self_check_runs._checked


def test_a_wrong_spark_bucket_hash_costs_files_not_partitions(
    spark: SparkSession,
    catalog_options: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Spark's bucket ids, when the tasks compute the values, only choose the task.

    Here Spark's hash is not Iceberg's (as if a Spark release had changed it): each
    Iceberg bucket reaches several tasks, and every row still lands in its partition.
    The files show it, and the next batch is shuffled by hash: no task closes a value's
    file early any more (one file per task and value).
    """

    def wrong(transform: Any, source: Column, source_type: Any) -> Column:
        if isinstance(transform, BucketTransform):
            return F.pmod(F.hash(source), F.lit(transform.num_buckets))  # Spark's hash, not Iceberg's
        return partition_value_column(transform, source, source_type)

    monkeypatch.setattr(router, "partition_value_column", wrong)
    # Above the target in total, so the second batch is shuffled too (not one task).
    options = {"partition-by": PARTITION_BY, "write.target-file-size-bytes": str(64 * KiB)}
    sink = sink_for(catalog_options, "wronghash", **options)
    with caplog.at_level(logging.INFO):
        sink(taxi_rows(spark, 0, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 0)
        sink(taxi_rows(spark, TAXI_ROWS, TAXI_ROWS, partitions=TAXI_INPUT_PARTITIONS), 1)
    assert "Spark's bucket hash or shuffle is not what the sink expects" in caplog.text
    assert "db.wronghash is shuffled by hash" in caplog.text
    table = sink.catalog.load_table("db.wronghash")
    first, second = written(table, 0), written(table, 1)
    assert len({f.partition for f in first}) == TAXI_VALUES < len(first)  # more files, same values
    assert max(len(tasks) for tasks in tasks_by_bucket(first, lambda f: f.partition[1]).values()) > 1
    assert len(second) == len({(f.task, f.partition) for f in second})
    assert table.scan().to_arrow().num_rows == 2 * TAXI_ROWS
    assert check_data_files(table) == len(first) + len(second)  # every row's partition value is its file's


def test_a_task_reading_several_buckets_finishes_each_before_the_next(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    """A write task reads its buckets one after the other and closes each bucket's files early.

    With a 32 MiB budget the task splits 1 MiB at a time, and each of its buckets spans
    several such chunks: it holds about one bucket's writers at once, not all of them.
    """
    rows = 200_000
    options = {"partition-by": PARTITION_BY, "write.fanout.memory-budget-bytes": str(32 * 2**20)}
    sink = sink_for(catalog_options, "sequential", **options)
    sink(taxi_rows(spark, 0, rows, partitions=TAXI_INPUT_PARTITIONS), 0)
    table = sink.catalog.load_table("db.sequential")
    files = written(table)
    assert len(files) == len({f.partition for f in files}) == TAXI_VALUES  # one file per value
    values_per_task = [len({f.partition for f in task_files}) for task_files in by_task(files).values()]
    assert min(values_per_task) >= 8  # at least two buckets of four days in every task
    peak = sink.metrics.registry.get_sample_value("icesink_open_writers_max", {"table": "db.sequential"})
    assert peak is not None and peak <= 8 < max(values_per_task), (peak, values_per_task)
    assert sum(f.records for f in files) == rows == table.scan().to_arrow().num_rows
    assert check_data_files(table) == TAXI_VALUES
