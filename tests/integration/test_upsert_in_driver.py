"""Small one-table upsert batches split in the driver (:mod:`icesink.batch.collected`): one Spark job a
batch, each key's last change as Spark's split gives it, read back by pyiceberg and DuckDB; and every
batch the driver may not split (rejected changes, a value out of range, a new column) split by Spark,
its dead letters written, the next batch back in the driver."""

from __future__ import annotations

import functools
import random
from typing import Any

import pyarrow as pa

from icesink import IcebergSink
from tests.integration.test_upsert_sink import assert_reads, upsert_options
from tests.support.spark_jobs import count_spark_jobs
from tests.support.tables import table_rows
from tests.support.upserts import CHANGE_BATCHES, CHANGE_SCHEMA, State, changes, expected_state


def _sink(catalog_options: dict[str, str], sink_id: str, table: str = "db.items") -> IcebergSink:
    options = {"sink-id": sink_id, "table": table, "maintenance.enabled": "false"}
    return IcebergSink.from_options(upsert_options(catalog_options, **options))


def _run(spark: Any, sink: IcebergSink, batch: pa.Table, batch_id: int) -> int:
    """``batch`` through ``sink``; the Spark jobs it ran."""
    return count_spark_jobs(spark, functools.partial(sink, spark.createDataFrame(batch), batch_id))


def test_small_batches_are_split_in_the_driver_in_one_spark_job(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    sink = _sink(catalog_options, "in-driver")
    state: State = {}
    jobs = []
    for batch_id, batch in enumerate(CHANGE_BATCHES):  # updates, deletes, re-inserts, ties, out of order
        jobs.append(_run(spark, sink, batch, batch_id))
        expected_state(state, batch)
        assert_reads(sink.catalog.load_table("db.items"), state)
    assert jobs[1:] == [1, 1, 1]  # the batch collected, and nothing else in Spark
    table = sink.catalog.load_table("db.items")
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary["added-position-deletes"] == "2"  # keys 5 and 0 replaced
    sink.close()


def test_the_driver_keeps_each_keys_last_change_as_spark_does(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    """The same random batches, many changes a key and many ties of the order column, over the
    Spark partitions of a batch: split in the driver by one sink, by Spark by another (its later
    batches' ``v`` of a narrower type, to be converted), both equal to the model."""
    rng = random.Random(20261203)
    batches = [changes(*[(k, f"k{k}", k, "c", 0) for k in range(200)])]
    for b in range(1, 5):
        rows: list[tuple[int, str | None, int, str, int]] = []
        for _ in range(1_500):
            k, op = rng.randrange(260), rng.choice("cuuud")
            name = None if op == "d" else f"k{k}-{b}-{len(rows)}"
            rows.append((k, name, rng.randrange(1000), op, rng.randrange(4)))
        batches.append(changes(*rows))
    in_driver, by_spark = _sink(catalog_options, "driver"), _sink(catalog_options, "spark", "db.spark")
    narrow = pa.schema([f.with_type(pa.int32()) if f.name == "v" else f for f in CHANGE_SCHEMA])
    state: State = {}
    for batch_id, batch in enumerate(batches):
        driver_df = spark.createDataFrame(batch)
        assert driver_df.rdd.getNumPartitions() > 1  # in order: the model's order is the batch's
        jobs = count_spark_jobs(spark, functools.partial(in_driver, driver_df, batch_id))
        spark_df = spark.createDataFrame(batch.cast(narrow) if batch_id else batch)
        spark_jobs = count_spark_jobs(spark, functools.partial(by_spark, spark_df, batch_id))
        expected_state(state, batch)
        assert_reads(in_driver.catalog.load_table("db.items"), state)
        assert_reads(by_spark.catalog.load_table("db.spark"), state)
        assert batch_id == 0 or (jobs == 1 and spark_jobs > 1)
    in_driver.close()
    by_spark.close()


def test_batches_the_driver_may_not_split_go_through_spark(
    spark: Any, catalog_options: dict[str, str]
) -> None:
    sink = _sink(catalog_options, "fallback")
    state: State = {}
    first = changes(*[(k, f"k{k}", k, "c", 0) for k in range(10)])
    for batch_id, batch in enumerate([first, changes((1, "one", 1, "u", 1))]):
        _run(spark, sink, batch, batch_id)
        expected_state(state, batch)
    rejected = changes(
        (None, "no key", 1, "u", 2),
        (2, "unknown", 2, "x", 2),
        (None, None, None, "t", 2),
        (3, "three", 3, "u", 2),
        (4, None, None, "d", 2),
    )
    assert _run(spark, sink, rejected, 2) > 1  # split by Spark, which sets the three aside
    expected_state(state, changes((3, "three", 3, "u", 2), (4, None, None, "d", 2)))
    assert_reads(sink.catalog.load_table("db.items"), state)
    dead = table_rows(sink.catalog.load_table("db.items__dlq"))
    assert sorted(r["reason"] for r in dead) == ["null_key", "truncate", "unknown_op"]

    back = changes((5, "five", 5, "u", 3))
    assert _run(spark, sink, back, 3) == 1  # the next batch: in the driver again
    expected_state(state, back)
    assert_reads(sink.catalog.load_table("db.items"), state)

    numbered_ops = spark.createDataFrame(changes((7, "seven", 7, None, 4))).selectExpr(
        "id", "name", "v", "CAST(1 AS INT) AS _op", "seq"
    )
    assert count_spark_jobs(spark, functools.partial(sink, numbered_ops, 4)) > 1  # ops not text: Spark's
    assert [r["reason"] for r in table_rows(sink.catalog.load_table("db.items__dlq"))].count(
        "unknown_op"
    ) == 2

    wider = spark.createDataFrame(changes((6, "six", 6, "u", 4))).selectExpr("*", "'new' AS extra")
    assert count_spark_jobs(spark, functools.partial(sink, wider, 5)) > 1  # a new column: Spark's split
    table = sink.catalog.load_table("db.items")
    assert table.schema().column_names == ["id", "name", "v", "extra"]
    assert {r["id"]: r["extra"] for r in table_rows(table)}[6] == "new"
    sink.close()


def test_a_timestamp_out_of_range_is_a_dead_letter(spark: Any, catalog_options: dict[str, str]) -> None:
    """A batch of the table's schema whose timestamp is past 9999: split by Spark, that row a dead letter."""
    schema = pa.schema(
        [("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("_op", pa.string()), ("seq", pa.int64())]
    )

    def batch(*rows: tuple[int, int, str]) -> Any:
        columns = {"id": [r[0] for r in rows], "ts": [r[1] for r in rows], "_op": [r[2] for r in rows]}
        return spark.createDataFrame(pa.table({**columns, "seq": [0] * len(rows)}, schema))

    sink = _sink(catalog_options, "ranges")
    sink(batch(*[(k, k * 1_000_000, "c") for k in range(4)]), 0)
    assert count_spark_jobs(spark, functools.partial(sink, batch((1, 5_000_000, "u")), 1)) == 1
    past_9999 = 253_402_300_800_000_000  # 10000-01-01, micros
    assert count_spark_jobs(spark, functools.partial(sink, batch((2, past_9999, "u"), (3, 7, "u")), 2)) > 1
    table = sink.catalog.load_table("db.items")
    rows = {r["id"]: r["ts"].timestamp() for r in table_rows(table)}
    assert rows == {0: 0.0, 1: 5.0, 2: 2.0, 3: 7e-6}  # key 2 keeps its row
    dead = table_rows(sink.catalog.load_table("db.items__dlq"))
    assert [(r["reason"], r["column"]) for r in dead] == [("out_of_range", "ts")]
    sink.close()
