"""The upsert split's one Spark job, without a shuffle: the changes set aside counted per table and
reason, and the delete changes whose keys the driver finds the deleted keys among."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink.batch.changes import ChangeBatch, ChangeSplit
from icesink.config import SinkConfig
from icesink.metrics import SinkMetrics
from tests.support.spark_jobs import spark_jobs, stage_tasks


def _config(tmp_path: Path, table: str) -> SinkConfig:
    return SinkConfig.from_options(
        {
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
            "table": table,
            "write.mode": "upsert",
            "upsert.key-columns": "id",
        }
    )


def _batch(spark: SparkSession) -> Any:
    rows = [
        ("a", 1, "c"),
        ("a", None, "c"),  # null_key
        ("a", None, "u"),  # null_key
        ("a", None, "t"),  # truncate
        ("b", 2, "x"),  # unknown_op
        ("b", 3, "d"),
        ("c", None, "z"),  # appended: passes as it is
    ]
    return spark.createDataFrame(rows, "kind string, id long, _op string").repartition(3)


def test_rejected_changes_of_two_tables_are_counted_in_one_job_without_a_shuffle(
    spark: SparkSession, tmp_path: Path
) -> None:
    upserted = {"a": _config(tmp_path, "cdc.a"), "b": _config(tmp_path, "cdc.b")}
    split = ChangeSplit(upserted["a"], SinkMetrics())
    batch = _batch(spark).persist()
    batch.count()
    made: list[ChangeBatch] = []
    split_call = lambda: made.append(split.split(batch, F.col("kind"), upserted))  # noqa: E731
    assert len(spark_jobs(spark, split_call)) == 1  # the count: no shuffle map job before it
    assert stage_tasks(spark, split_call) == [3]  # one stage, a task per partition of the batch
    changes = made[0]
    assert changes.rejected_by_table == (
        ("cdc.a", "null_key", 2),
        ("cdc.a", "truncate", 1),
        ("cdc.b", "unknown_op", 1),
    )
    assert changes.rejected_rows == 4
    assert changes.facts is not None
    dead = sorted((r["source_table"], r["reason"], r["value"]) for r in changes.facts.rejected_rows.collect())
    assert dead == [
        ("cdc.a", "null_key", None),
        ("cdc.a", "null_key", None),
        ("cdc.a", "truncate", "t"),
        ("cdc.b", "unknown_op", "x"),
    ]
    kept = sorted((r["kind"], r["id"]) for r in changes.rows.collect())
    assert kept == [("a", 1), ("c", None)]  # b's 3 is deleted
    for c in made:
        c.release()
    batch.unpersist()


def test_a_batch_without_rejected_changes_counts_none(spark: SparkSession, tmp_path: Path) -> None:
    config = _config(tmp_path, "cdc.a")
    batch = spark.createDataFrame([(1, "c"), (1, "u"), (2, "d")], "id long, _op string")
    changes = ChangeSplit(config, SinkMetrics()).split_one(batch, config)
    try:
        assert changes.rejected_by_table == () and changes.rejected_rows == 0
        assert sorted(r["id"] for r in changes.rows.collect()) == [1]
    finally:
        changes.release()


def test_the_deleted_keys_are_the_deletes_no_written_row_has(spark: SparkSession, tmp_path: Path) -> None:
    config = _config(tmp_path, "cdc.a")
    rows = [(1, "d"), (1, "d"), (2, "d"), (2, "c"), (3, "u"), (3, "d"), (4, "c"), (None, "d")]
    batch = spark.createDataFrame(rows, "id long, _op string")
    changes = ChangeSplit(config, SinkMetrics()).split_one(batch, config)
    try:
        assert changes.facts is not None
        assert changes.rejected_by_table == (("cdc.a", "null_key", 1),)
        written = pa.table({"id": pa.array(sorted(r["id"] for r in changes.rows.collect()), pa.int64())})
        assert written.column("id").to_pylist() == [2, 4]
        deleted = changes.facts.deleted_keys(written)
        assert deleted is not None and sorted(deleted.column("id").to_pylist()) == [1, 3]
        assert deleted.schema == written.schema
        assert changes.deletes is not None  # what Spark collects when the driver cannot tell
        assert sorted(r["id"] for r in changes.deletes.collect()) == [1, 3]
        as_text = pa.table({"id": pa.array(["2", "4"])})  # keys of other types: Spark casts them
        assert changes.facts.deleted_keys(as_text) is None
    finally:
        changes.release()
