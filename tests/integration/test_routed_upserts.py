"""Routed tables that upsert: each its own keys, its changes applied once, next to appended tables."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink, failpoints
from icesink.errors import ConfigError
from icesink.maintenance import referenced_files
from tests.support.duckdb_reader import duckdb_read
from tests.support.failing_commits import second_commit_fails
from tests.support.spark_jobs import count_spark_jobs
from tests.support.tables import catalog_from_options, table_rows

CHANGES = st.StructType(
    [
        st.StructField("kind", st.StringType()),
        st.StructField("id", st.LongType()),
        st.StructField("order_id", st.LongType()),
        st.StructField("name", st.StringType()),
        st.StructField("_op", st.StringType()),
        st.StructField("ts", st.LongType()),
    ]
)
UPSERTED = {"cdc.users": "id", "cdc.orders": "order_id"}


def _change(kind: str, key: int | None, op: str, name: str = "", ts: int = 0) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind, "id": None, "order_id": None, "name": name, "_op": op, "ts": ts}
    row["order_id" if kind == "orders" else "id"] = key
    return row


BATCHES = [
    [
        *[_change("users", k, "c", f"u{k}") for k in (1, 2, 3)],
        *[_change("orders", k, "c", f"o{k}") for k in (10, 11)],
        _change("log", 100, "c", "a"),
    ],
    [
        _change("users", 1, "u", "u1-v2"),
        _change("users", 2, "d"),
        _change("users", 3, "u", "u3-newest", ts=5),  # two changes of one key: the greatest ts wins
        _change("users", 3, "u", "u3-older", ts=4),
        _change("users", None, "c", "no key"),  # a dead letter: null_key
        _change("users", 4, "x", "bad op"),  # a dead letter: unknown_op
        _change("users", None, "t"),  # a Debezium truncate (no key): a dead letter, truncate
        _change("orders", 10, "d"),
        _change("orders", 12, "r", "o12"),
        _change("log", 101, "d", "kept as a row"),  # appended: the op is a column like any other
    ],
    [_change("users", 2, "c", "u2-again"), _change("orders", 11, "u", "o11-v2")],
]
EXPECTED = {
    "cdc.users": {1: "u1-v2", 2: "u2-again", 3: "u3-newest"},
    "cdc.orders": {11: "o11-v2", 12: "o12"},
}


def _options(catalog_options: dict[str, str], template: str = "cdc.{value}", **more: str) -> dict[str, str]:
    per_table = {name: {"write.mode": "upsert", "upsert.key-columns": key} for name, key in UPSERTED.items()}
    return {
        **catalog_options,
        "sink-id": "routed-upserts",
        "route.by": "field",
        "route.field": "kind",
        "route.table-template": template,
        "route.table-options": json.dumps(per_table),
        "upsert.order-column": "ts",
        "dead-letter.table": "cdc.routed__dlq",
        **more,
    }


def _batch(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(rows, CHANGES)


def _state(table: Any, key: str) -> dict[int, str]:
    return {r[key]: r["name"] for r in table_rows(table)}


def test_changes_of_each_table_by_its_own_key_next_to_an_appended_table(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = _options(catalog_options)
    with IcebergSink.from_options(options) as sink:
        for batch_id, rows in enumerate(BATCHES):
            sink(_batch(spark, rows), batch_id)
    catalog = catalog_from_options(options)
    for name, key in UPSERTED.items():
        table = catalog.load_table(name)
        assert _state(table, key) == EXPECTED[name]
        assert {r[key]: r["name"] for r in duckdb_read(table.metadata_location).to_pylist()} == EXPECTED[name]
        assert "_op" not in table.schema().column_names and "ts" not in table.schema().column_names
        assert table.schema().identifier_field_names() == {key}
        assert table.format_version == 2
        assert [s.summary.operation.value for s in table.snapshots() if s.summary] == [
            "overwrite"
        ] * 3  # row deltas
        manifests = table.current_snapshot().manifests(table.io)  # type: ignore[union-attr]
        entries = [e for m in manifests for e in m.fetch_manifest_entry(table.io)]
        assert {e.data_file.content.name for e in entries} == {"DATA", "POSITION_DELETES"}
    log = catalog.load_table("cdc.log")
    assert sorted((r["id"], r["_op"]) for r in table_rows(log)) == [(100, "c"), (101, "d")]
    dead = table_rows(catalog.load_table("cdc.routed__dlq"))
    assert sorted((r["source_table"], r["reason"], r["column"], r["value"]) for r in dead) == [
        ("cdc.users", "null_key", "id", None),
        ("cdc.users", "truncate", "_op", "t"),
        ("cdc.users", "unknown_op", "_op", "x"),
    ]
    registry = sink.metrics.registry
    labels = {"table": "cdc.users", "sink_id": "routed-upserts"}
    assert registry.get_sample_value("icesink_upserted_keys_total", labels) == 6  # 3, 2 (1 deleted), 1
    assert registry.get_sample_value("icesink_deleted_keys_total", labels) == 1


def test_spark_jobs_per_batch_do_not_grow_with_the_upserted_tables(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    counts: dict[int, list[int]] = {}
    for n in (2, 8):
        options = _options(
            catalog_options,
            template=f"n{n}.{{value}}",
            **{
                "route.table-options": json.dumps(
                    {f"n{n}.*": {"write.mode": "upsert", "upsert.key-columns": "id"}}
                )
            },
        )
        batches = [
            [_change(f"t{i}", k, "c", f"v{k}") for i in range(n) for k in range(3)],
            [_change(f"t{i}", k, op, "new") for i in range(n) for k, op in ((0, "u"), (1, "d"), (7, "c"))],
        ]
        with IcebergSink.from_options(options) as sink:
            counts[n] = [
                count_spark_jobs(spark, functools.partial(sink, _batch(spark, rows), b))
                for b, rows in enumerate(batches)
            ]
        catalog = catalog_from_options(options)
        for i in range(n):
            assert _state(catalog.load_table(f"n{n}.t{i}"), "id") == {0: "new", 2: "v2", 7: "new"}
    print(f"Spark jobs per batch (first, second): {counts}")
    assert counts[2] == counts[8], counts


def test_a_crash_between_two_tables_row_deltas_replays_only_the_rest(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = _options(catalog_options)
    with IcebergSink.from_options(options) as sink:
        sink(_batch(spark, BATCHES[0]), 0)
    catalog = catalog_from_options(options)
    snapshots = {name: len(catalog.load_table(name).snapshots()) for name in UPSERTED}
    sink = IcebergSink.from_options(options)
    with second_commit_fails(), pytest.raises(failpoints.InjectedFault):
        sink(_batch(spark, BATCHES[1]), 1)
    grew = [name for name in UPSERTED if len(catalog.load_table(name).snapshots()) > snapshots[name]]
    assert len(grew) == 1  # one row delta landed, the other did not
    failed = catalog.load_table(next(name for name in UPSERTED if name not in grew))
    assert _parquet_files(failed) - _referenced(failed)  # its attempt's data and delete files are left
    with sink:
        sink(_batch(spark, BATCHES[1]), 1)  # the replay: the committed table is skipped
        sink(_batch(spark, BATCHES[2]), 2)
    for name, key in UPSERTED.items():
        table = catalog.load_table(name)
        assert _state(table, key) == EXPECTED[name]
        assert len(table.snapshots()) == 3
        assert _parquet_files(table) == _referenced(table), name  # all there; the failed attempt's gone
    assert len(table_rows(catalog.load_table("cdc.routed__dlq"))) == 3  # not twice
    labels = {"table": "cdc.users", "reason": "null_key"}
    assert sink.metrics.registry.get_sample_value("icesink_dead_letter_reasons_total", labels) == 1


def _parquet_files(table: Any) -> set[str]:
    return {f"file://{p}" for p in Path(table.location().removeprefix("file://")).rglob("*.parquet")}


def _referenced(table: Any) -> set[str]:
    """The data and delete files of every snapshot."""
    return {p for p in referenced_files(table) if p.endswith(".parquet")}


@pytest.mark.parametrize(
    ("table_options", "message"),
    [
        ({"cdc.*": {"write.mode": "upsert"}}, "without upsert.key-columns"),
        ({"cdc.*": {"upsert.key-columns": "id"}}, "its write.mode is 'append'"),
        ({"cdc.*": {"write.mode": "upsert", "upsert.key-columns": "ts"}}, "is the op or order column"),
    ],
)
def test_bad_routed_upsert_options_fail_at_construction(
    catalog_options: dict[str, str], table_options: dict[str, Any], message: str
) -> None:
    options = _options(catalog_options, **{"route.table-options": json.dumps(table_options)})
    with pytest.raises(ConfigError, match=message):
        IcebergSink.from_options(options)


def test_an_existing_v1_table_is_refused_before_anything_is_written(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path
) -> None:
    catalog = catalog_from_options(catalog_options)
    catalog.create_namespace("cdc")
    schema = _batch(spark, BATCHES[0]).select("id", "name").toArrow().schema
    catalog.create_table("cdc.users", schema, properties={"format-version": "1"})
    with (
        IcebergSink.from_options(_options(catalog_options)) as sink,
        pytest.raises(Exception, match="format"),
    ):
        sink(_batch(spark, BATCHES[0]), 0)
    assert not [p for p in warehouse.rglob("*.parquet") if "/cdc.db/users/data/" in str(p)]
