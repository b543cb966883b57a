"""One sink, many tables: rows routed by a field or topic, each table evolving on its own, exactly once."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from icesink.destinations.resolve import resolve, resolve_in_tasks
from icesink.errors import BadRecordError, CommitError, ConfigError
from tests.support.failing_commits import second_commit_fails
from tests.support.spark_jobs import count_spark_jobs
from tests.support.tables import catalog_from_options, check_data_files, data_files, table_rows

EVENTS = st.StructType(
    [
        st.StructField("id", st.LongType()),
        st.StructField("type", st.StringType()),
        st.StructField("x", st.LongType()),
        st.StructField("page", st.StringType()),
        st.StructField("amount", st.DoubleType()),
    ]
)
# Each event type fills its own columns; the others stay null in its rows.
COLUMNS = {"click": ("x",), "view": ("page",), "buy": ("amount",)}


def _event(k: int, kind: str) -> dict[str, Any]:
    row: dict[str, Any] = {"id": k, "type": kind, "x": None, "page": None, "amount": None}
    if kind == "click":
        row["x"] = k
    elif kind == "view":
        row["page"] = f"/p/{k}"
    elif kind == "buy":
        row["amount"] = k + 0.5
    return row


def _events(spark: SparkSession, kinds: list[str], per_kind: int, start: int = 0) -> DataFrame:
    rows = [_event(start + i * len(kinds) + j, kind) for i in range(per_kind) for j, kind in enumerate(kinds)]
    return spark.createDataFrame(rows, EVENTS)


def _sink(catalog_options: dict[str, str], **options: str) -> IcebergSink:
    naming = {} if "route.tables" in options else {"route.table-template": "ev.{value}"}
    routing = {"sink-id": "routed", "route.by": "field", "route.field": "type", **naming}
    return IcebergSink.from_options({**catalog_options, **routing, **options})


def _columns(catalog: Catalog, name: str) -> list[str]:
    return [f.name for f in catalog.load_table(name).schema().fields]


def test_rows_go_to_their_own_tables_with_their_own_columns(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    with _sink(catalog_options, **{"write.target-file-size-bytes": "4096"}) as sink:
        sink(_events(spark, ["click", "view", "buy"], 50), 0)
    catalog = catalog_from_options(catalog_options)
    registry = sink.metrics.registry
    for kind in COLUMNS:  # each table under its own label
        labels = {"table": f"ev.{kind}", "sink_id": "routed"}
        assert registry.get_sample_value("icesink_rows_written_total", labels) == 50
        assert registry.get_sample_value("icesink_commits_total", {**labels, "outcome": "committed"}) == 1
    for kind, own in COLUMNS.items():
        table = catalog.load_table(f"ev.{kind}")
        assert _columns(catalog, f"ev.{kind}") == ["id", "type", *own]
        rows = table_rows(table)
        assert sorted(r["id"] for r in rows) == [3 * i + list(COLUMNS).index(kind) for i in range(50)]
        assert {r["type"] for r in rows} == {kind}
        assert all(r[own[0]] is not None for r in rows)
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        summary = snapshot.summary
        assert summary["icesink.sink-id"] == "routed" and summary["icesink.batch-ids"] == "0"
        check_data_files(table)
    assert not catalog.table_exists("ev.routed__dlq")


def test_a_new_column_in_one_destination_evolves_only_its_table(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    schema = st.StructType([*EVENTS.fields, st.StructField("extra", st.StringType())])
    with _sink(catalog_options) as sink:
        sink(_events(spark, ["click", "view", "buy"], 5), 0)
        rows = [
            {**_event(100 + k, kind), "extra": "new" if kind == "click" else None}
            for k, kind in enumerate(["click", "view", "buy"] * 4)
        ]
        sink(spark.createDataFrame(rows, schema), 1)
    catalog = catalog_from_options(catalog_options)
    assert _columns(catalog, "ev.click") == ["id", "type", "x", "extra"]
    assert _columns(catalog, "ev.view") == ["id", "type", "page"]
    assert _columns(catalog, "ev.buy") == ["id", "type", "amount"]
    clicks = table_rows(catalog.load_table("ev.click"))
    assert (
        len(clicks) == 9
        and sorted(str(r["extra"]) for r in clicks) == ["New"] * 0 + ["None"] * 5 + ["new"] * 4
    )
    assert len(table_rows(catalog.load_table("ev.view"))) == 9


def test_unmapped_and_bad_values_are_dead_letters_and_no_row_is_lost(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    tables = '{"click": "ev.clicks", "view": "ev.views"}'
    schema = st.StructType(
        [f if f.name != "x" else st.StructField("x", st.StringType()) for f in EVENTS.fields]
    )
    rows = [
        {**_event(k, kind), "x": str(k) if kind == "click" else None}
        for k, kind in enumerate(["click", "view", "buy"] * 10)
    ]
    rows[0]["x"] = "not a number"  # a click whose x cannot be a long
    rows.append({**_event(99, "view"), "type": None})  # a null destination value
    with _sink(catalog_options, **{"route.tables": tables}) as sink:
        sink(_events(spark, ["click", "view"], 1, start=1000), 0)  # creates the tables: x is a long
        sink(spark.createDataFrame(rows, schema), 1)
    catalog = catalog_from_options(catalog_options)
    clicks, views = (
        [r for r in table_rows(catalog.load_table(t)) if r["id"] < 1000] for t in ("ev.clicks", "ev.views")
    )
    assert len(clicks) == 9 and len(views) == 10
    assert sorted(r["x"] for r in clicks) == list(range(3, 30, 3))  # parsed from text
    assert not catalog.table_exists("ev.buy")
    dead = table_rows(catalog.load_table("ev.routed__dlq"))
    reasons = sorted((d["reason"], d["source_table"], d["value"]) for d in dead)
    assert reasons == [
        ("parse_error", "ev.clicks", "not a number"),
        ("unroutable: the destination value is null", "route.tables", "null"),
        *[("unroutable: value 'buy' is not a key of route.tables", "route.tables", "buy")] * 10,
    ]
    assert len(clicks) + len(views) + len(dead) == len(rows)


def test_empty_and_null_values_under_a_template_are_dead_letters(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    rows = [_event(k, kind) for k, kind in enumerate(["click", "view"] * 3)]
    rows += [{**_event(50, "click"), "type": ""}, {**_event(51, "view"), "type": None}]
    with _sink(catalog_options) as sink:
        sink(spark.createDataFrame(rows, EVENTS), 0)
    catalog = catalog_from_options(catalog_options)
    assert sorted(r["id"] for r in table_rows(catalog.load_table("ev.click"))) == [0, 2, 4]
    assert sorted(r["id"] for r in table_rows(catalog.load_table("ev.view"))) == [1, 3, 5]
    dead = table_rows(catalog.load_table("ev.routed__dlq"))
    assert sorted(d["reason"] for d in dead) == [
        "unroutable: the destination value is empty",
        "unroutable: the destination value is null",
    ]
    assert {str(d["value"]) for d in dead} == {"", "null"}


def test_table_options_partition_the_matching_tables(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    overrides = '{"ev.c*": {"partition-by": "bucket(4, id)"}, "ev.v*": {"partition-by": "page"}}'
    with _sink(catalog_options, **{"route.table-options": overrides}) as sink:
        sink(_events(spark, ["click", "view", "buy"], 20), 0)
    catalog = catalog_from_options(catalog_options)
    click, view, buy = (catalog.load_table(f"ev.{k}") for k in ("click", "view", "buy"))
    assert [str(f.transform) for f in click.spec().fields] == ["bucket[4]"]
    assert [str(f.transform) for f in view.spec().fields] == ["identity"]
    assert not buy.spec().fields
    assert len({f.partition[0] for f in data_files(click)}) == 4
    assert len(data_files(view)) == 20  # one file per page
    for table in (click, view, buy):
        check_data_files(table)
        assert len(table_rows(table)) == 20


def test_spark_jobs_per_batch_do_not_grow_with_the_tables(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    counts: dict[int, list[int]] = {}
    for n in (3, 30):
        kinds = [f"k{i}" for i in range(n)]
        with _sink(catalog_options, **{"route.table-template": f"n{n}.{{value}}"}) as sink:
            # the first batch creates the tables, the second finds them
            counts[n] = [
                count_spark_jobs(spark, functools.partial(sink, _events(spark, kinds, 2), b)) for b in (0, 1)
            ]
        catalog = catalog_from_options(catalog_options)
        assert len(catalog.list_tables(f"n{n}")) == n
        assert all(len(table_rows(catalog.load_table(f"n{n}.k{i}"))) == 4 for i in range(n))
    print(f"Spark jobs per batch (first, second): {counts}")
    assert counts[3] == counts[30] and max(counts[3]) <= 4, counts


@pytest.mark.parametrize("restart", [False, True], ids=["same-sink", "new-sink"])
def test_a_crash_between_two_tables_commits_replays_only_the_rest(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path, restart: bool
) -> None:
    df = _events(spark, ["click", "view", "buy"], 10)
    sink = _sink(catalog_options)
    with second_commit_fails(), pytest.raises(CommitError):
        sink(df, 0)
    catalog = catalog_from_options(catalog_options)
    committed = {k for k in COLUMNS if catalog.load_table(f"ev.{k}").current_snapshot() is not None}
    assert len(committed) == 2  # tables commit independently: only the failed one lacks the batch
    written = {f.file_path for k in committed for f in data_files(catalog.load_table(f"ev.{k}"))}
    assert len(_parquet_files(warehouse)) > len(written)  # the failed table's files are left behind
    if restart:
        sink.close()
        sink = _sink(catalog_options)
    with sink:
        sink(df, 0)  # the replay
    referenced = set()
    for kind in COLUMNS:
        table = catalog.load_table(f"ev.{kind}")
        ids = sorted(r["id"] for r in table_rows(table))
        assert ids == [3 * i + list(COLUMNS).index(kind) for i in range(10)]
        assert len(table.metadata.snapshots) == 1
        referenced |= {f.file_path for f in data_files(table)}
    assert _parquet_files(warehouse) == referenced  # nothing of the failed attempt is left


def _parquet_files(warehouse: Path) -> set[str]:
    return {f"file://{p}" for p in warehouse.rglob("*.parquet") if "/data/" in str(p)}


def test_routed_by_topic_with_on_bad_record_fail_commits_nothing_of_a_bad_batch(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    longs = st.StructType([st.StructField("topic", st.StringType()), st.StructField("n", st.LongType())])
    texts = st.StructType([st.StructField("topic", st.StringType()), st.StructField("n", st.StringType())])
    options = {"route.by": "topic", "route.table-template": "raw.{topic}", "on-bad-record": "fail"}
    with IcebergSink.from_options({**catalog_options, "sink-id": "topics", **options}) as sink:
        sink(spark.createDataFrame([("Orders-EU", 1), ("payments", 2)], longs), 0)
        catalog = catalog_from_options(catalog_options)
        assert sorted(t[1] for t in catalog.list_tables("raw")) == ["orders_eu", "payments"]
        names = ("raw.orders_eu", "raw.payments")
        before = {t: catalog.load_table(t).metadata.current_snapshot_id for t in names}
        with pytest.raises(
            BadRecordError, match=r"'x' of column 'n' cannot be written to table raw\.orders_eu"
        ):
            sink(spark.createDataFrame([("Orders-EU", "x"), ("payments", "3")], texts), 1)
    assert {t: catalog.load_table(t).metadata.current_snapshot_id for t in names} == before
    assert not catalog.table_exists("raw.routed__dlq")


def test_metrics_max_tables_bounds_the_table_label(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    with _sink(catalog_options, **{"metrics.max-tables": "2"}) as sink:
        sink(_events(spark, ["click", "view", "buy"], 5), 0)
    samples = [
        s
        for family in sink.metrics.registry.collect()
        if family.name == "icesink_rows_written"
        for s in family.samples
        if s.name == "icesink_rows_written_total"
    ]
    tables = {s.labels["table"] for s in samples}
    assert "_other" in tables and len(tables) <= 3  # two tables of their own, the rest shared
    assert sum(s.value for s in samples) == 15  # every row counted, under some label
    catalog = catalog_from_options(catalog_options)
    assert sum(len(table_rows(catalog.load_table(f"ev.{k}"))) for k in COLUMNS) == 15


def test_destinations_counted_in_the_arrow_tasks_are_sparks(spark: SparkSession) -> None:
    schema = st.StructType(
        [
            st.StructField("_kafka_topic", st.StringType()),
            st.StructField("n", st.LongType()),
            st.StructField("x", st.DoubleType()),
            st.StructField("s", st.StructType([st.StructField("a", st.StringType())])),
            st.StructField("tags", st.ArrayType(st.StringType())),
        ]
    )
    rows = [
        ("a", 1, None, {"a": None}, None),  # a struct of nulls is a value
        ("a", None, float("nan"), None, []),
        ("b", None, None, None, None),  # b: rows, no value in any other column
        (None, 3, 1.5, None, ["t"]),
        ("c", 4, None, {"a": "z"}, None),
    ]
    source = spark.createDataFrame(rows * 7, schema).repartition(3)
    arrow_schema = source.schema

    def same(batches: Any) -> Any:
        yield from batches

    batch_df = source.mapInArrow(same, arrow_schema)

    in_tasks = resolve_in_tasks(source, same, batch_df.schema, 0)

    assert in_tasks == resolve(batch_df, 0)
    assert [(d.value, d.rows, d.columns) for d in in_tasks] == [
        ("a", 14, (0, 1, 2, 3, 4)),
        ("b", 7, (0,)),
        ("c", 7, (0, 1, 3)),
        (None, 7, (1, 2, 4)),
    ]
    numbers = batch_df.select(batch_df.n.alias("route"), "x")
    assert resolve_in_tasks(source, same, numbers.schema, 0) is None  # Spark writes a number as text


def test_prepare_makes_each_destination_table_before_the_first_batch(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    clicks = st.StructType([f for f in EVENTS.fields if f.name in ("id", "type", "x")])
    with _sink(catalog_options, **{"partition-by": "bucket(4, id)"}) as sink:
        tables = sink.prepare({"click": clicks, "view": EVENTS})
        assert sorted(tables) == ["click", "view"]
        catalog = catalog_from_options(catalog_options)
        assert _columns(catalog, "ev.click") == ["id", "type", "x"]
        assert _columns(catalog, "ev.view") == [f.name for f in EVENTS.fields]
        assert catalog.load_table("ev.click").current_snapshot() is None  # made, nothing written
        with pytest.raises(ConfigError, match="prepare\\(\\) of a routed sink was given one schema"):
            sink.prepare(EVENTS)
        sink(_events(spark, ["click", "view"], 20), 0)
    assert sorted(r["id"] for r in table_rows(catalog.load_table("ev.click"))) == list(range(0, 40, 2))


def test_prepare_refuses_a_value_that_names_no_table(catalog_options: dict[str, str]) -> None:
    sink = _sink(catalog_options, **{"route.tables": '{"click": "ev.clicks"}'})
    with pytest.raises(ConfigError, match="destination value 'view' names no table"):
        sink.prepare({"click": EVENTS, "view": EVENTS})
    sink.close()
