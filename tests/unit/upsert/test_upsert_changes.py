"""The last change of every key, and the split into rows to write and keys to look up."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from icesink.upsert.changes import change_set, last_changes
from tests.support.upserts import changes


def test_last_change_by_order_column_then_batch_order() -> None:
    batch = changes(
        (1, "a", 1, "c", 5),
        (2, "b", 1, "c", 1),
        (1, "late-arrival", 2, "u", 3),  # older by seq: loses
        (2, "b2", 2, "u", 1),  # same seq: the later row wins
        (3, "c", 1, "c", None),
        (3, "c2", 2, "u", 0),  # a null order value loses to any value
    )
    rows = last_changes(batch, ["id"], "seq").to_pylist()
    assert [(r["id"], r["name"]) for r in rows] == [(1, "a"), (2, "b2"), (3, "c2")]


def test_without_order_column_the_last_row_wins() -> None:
    batch = changes((1, "a", 1, "c", 9), (1, "b", 2, "u", 0))
    assert last_changes(batch, ["id"]).column("name").to_pylist() == ["b"]


def test_change_set_splits_deletes_and_rejects() -> None:
    batch = changes(
        (1, "a", 1, "c", 0),
        (2, None, None, "d", 0),
        (None, "no key", 1, "c", 0),
        (3, "x", 1, "z", 0),  # unknown op
        (4, "y", 1, None, 0),  # null op
        (1, None, None, "d", 1),
        (5, "e", 1, "r", 0),
    )
    change = change_set(batch, ["id"], "_op", "seq")
    assert change.keys.column("id").to_pylist() == [2, 1, 5]
    assert change.rows.column_names == ["id", "name", "v", "seq"]
    assert change.rows.column("id").to_pylist() == [5]
    assert sorted(r["name"] for r in change.rejected.to_pylist()) == ["no key", "x", "y"]


def test_batch_without_op_column_is_all_upserts() -> None:
    batch = pa.table({"id": [1, 2, 1], "name": ["a", "b", "c"]})
    change = change_set(batch, ["id"], "_op")
    assert change.rows.to_pylist() == [{"id": 2, "name": "b"}, {"id": 1, "name": "c"}]


def test_composite_keys() -> None:
    batch = pa.table({"k1": [1, 1, 1], "k2": ["a", "b", "a"], "v": [1, 2, 3]})
    rows: list[dict[str, Any]] = last_changes(batch, ["k1", "k2"]).to_pylist()
    assert rows == [{"k1": 1, "k2": "b", "v": 2}, {"k1": 1, "k2": "a", "v": 3}]


def test_spark_variant_keeps_the_same_rows(spark: Any) -> None:
    from icesink.upsert.changes import last_changes_df

    batch = changes((1, "a", 1, "c", 5), (1, "old", 2, "u", 3), (2, "b", 1, "c", 1), (2, "b2", 2, "u", 1))
    frame = spark.createDataFrame(batch.to_pandas()).coalesce(1)
    rows = last_changes_df(frame, ["id"], "seq").orderBy("id").select("id", "name").collect()
    assert [(r["id"], r["name"]) for r in rows] == [(1, "a"), (2, "b2")]


def test_spark_variant_shuffled_to_few_partitions_keeps_the_latest_row_of_every_key(spark: Any) -> None:
    """The changes cached in as many partitions as asked (not 200), the batch's own order
    deciding among changes of equal order: the same rows as the Arrow variant."""
    from icesink.upsert.changes import last_changes_df

    batch = changes(*[(k % 7, f"n{k}", k, "u", k % 3) for k in range(60)])  # ties of seq: the latest wins
    frame = spark.createDataFrame(batch.to_pandas()).repartition(3)  # rows in their batch order, by partition
    ordered = pa.Table.from_pandas(frame.toPandas(), preserve_index=False)
    last = last_changes_df(frame, ["id"], "seq", partitions=2)
    assert last.rdd.getNumPartitions() == 2
    rows = {(r["id"], r["name"]) for r in last.collect()}
    assert rows == {(r["id"], r["name"]) for r in last_changes(ordered, ["id"], "seq").to_pylist()}


def test_change_frames_match_the_arrow_change_set(spark: Any) -> None:
    from icesink.upsert.changes import change_frames

    batch = changes(
        (1, "a", 1, "c", 5),
        (1, "old", 2, "u", 3),
        (2, None, None, "d", 1),
        (None, "no key", 1, "c", 0),
        (3, "x", 1, "z", 0),
        (4, "y", 1, "u", 1),
        (4, None, None, "d", 2),
        (5, "e", 1, "r", 0),
    )
    frames = change_frames(spark.createDataFrame(batch.to_pandas()).coalesce(1), ["id"], "_op", "seq")
    arrow = change_set(batch, ["id"], "_op", "seq")

    assert sorted(frames.keys.column("id").to_pylist()) == sorted(arrow.keys.column("id").to_pylist())
    rows = sorted((r["id"], r["name"]) for r in frames.rows.collect())
    assert rows == sorted((r["id"], r["name"]) for r in arrow.rows.to_pylist()) == [(1, "a"), (5, "e")]
    assert "_op" not in frames.rows.columns
    assert sorted(r["name"] for r in frames.rejected.collect()) == ["no key", "x"]
