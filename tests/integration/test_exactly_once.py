"""A replayed batch is committed at most once, even after snapshot expiration."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from tests.support.tables import summary_of


def _frame(spark: SparkSession, start: int, n: int = 1000):
    return spark.range(start, start + n).select(
        F.col("id"), (F.col("id") % 5).alias("k"), F.timestamp_seconds(F.col("id") * 3600).alias("ts")
    )


def test_replay_after_expire_snapshots_writes_nothing(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.expired", "sink-id": "exp", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    for batch_id in range(3):
        sink(_frame(spark, batch_id * 1000), batch_id)
    table = sink.catalog.load_table("db.expired")
    newest = table.current_snapshot()
    assert newest is not None
    old = [s.snapshot_id for s in table.snapshots() if s.snapshot_id != newest.snapshot_id]
    table.maintenance.expire_snapshots().by_ids(old).commit()
    table = sink.catalog.load_table("db.expired")
    assert [s.snapshot_id for s in table.snapshots()] == [newest.snapshot_id]
    assert "icesink.batch-ids" in summary_of(newest)
    # No snapshot names batch 0 any more; the marker still knows it.
    sink(_frame(spark, 0), 0)
    sink(_frame(spark, 1000), 1)
    table = sink.catalog.load_table("db.expired")
    assert len(table.snapshots()) == 1
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(3000))


def test_new_batch_after_replays_is_committed(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.after", "sink-id": "after"}
    sink = IcebergSink.from_options(options)
    sink(_frame(spark, 0), 0)
    sink(_frame(spark, 0), 0)
    sink(_frame(spark, 1000), 1)
    table = sink.catalog.load_table("db.after")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(2000))
