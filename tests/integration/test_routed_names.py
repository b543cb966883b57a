"""Routed values that cannot have a table of their own are dead letters; the stream goes on.

Values that sanitize to one name (in one batch, after a restart, from two sinks), values
too long to name a table, a value naming the dead-letter table, and values past
``route.max-tables``: their rows go to the dead-letter table with the reason, every other
row to its table, and a replay writes nothing twice. Each test reads the tables back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyiceberg.catalog import Catalog
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from tests.support.tables import catalog_from_options, table_rows

ROWS = st.StructType([st.StructField("id", st.LongType()), st.StructField("kind", st.StringType())])
DLQ = "ev.routed__dlq"
ROUTE_VALUE_PROPERTY = "icesink.route.value"  # the value whose rows a table holds


def _batch(spark: SparkSession, kinds: Sequence[str | None], start: int = 0) -> DataFrame:
    return spark.createDataFrame([(start + i, kind) for i, kind in enumerate(kinds)], ROWS)


def _sink(catalog_options: dict[str, str], sink_id: str = "names", **options: str) -> IcebergSink:
    routing = {"route.by": "field", "route.field": "kind", "route.table-template": "ev.{value}"}
    return IcebergSink.from_options({**catalog_options, "sink-id": sink_id, **routing, **options})


def _kinds(catalog: Catalog, table: str) -> list[str]:
    return sorted(r["kind"] for r in table_rows(catalog.load_table(table)))


def _dead(catalog: Catalog) -> list[dict[str, Any]]:
    return sorted(table_rows(catalog.load_table(DLQ)), key=lambda d: d["batch_id"])


def test_values_making_one_name_in_one_batch_keep_the_first_and_dead_letter_the_others(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    kinds = ["pay-in", "pay.in", "pay-in", "日本", "中国", "a/b", "a`b", "a\x00b", "ok"]
    with _sink(catalog_options) as sink:
        sink(_batch(spark, kinds), 0)
        sink(_batch(spark, kinds), 0)  # a replay writes nothing again
    catalog = catalog_from_options(catalog_options)
    owners = {"ev.pay_in": "pay-in", "ev.__": "中国", "ev.a_b": "a\x00b", "ev.ok": "ok"}
    for table, owner in owners.items():
        assert catalog.load_table(table).metadata.properties[ROUTE_VALUE_PROPERTY] == owner
        assert set(_kinds(catalog, table)) == {owner}
    assert _kinds(catalog, "ev.pay_in") == ["pay-in", "pay-in"]
    dead = _dead(catalog)
    assert sorted(d["value"] for d in dead) == sorted(["pay.in", "日本", "a/b", "a`b"])
    letter = next(d for d in dead if d["value"] == "pay.in")
    assert letter["reason"].startswith("unroutable: values 'pay.in' and 'pay-in' both make table ev.pay_in")
    assert letter["column"] == "kind" and letter["source_table"] == "ev.{value}"
    assert sum(len(table_rows(catalog.load_table(t))) for t in owners) + len(dead) == len(kinds)
    labels = {"table": "ev.{value}", "reason": "unroutable"}
    assert sink.metrics.registry.get_sample_value("icesink_dead_letter_reasons_total", labels) == 4


def test_a_colliding_value_after_a_restart_or_from_another_sink_is_a_dead_letter(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    with _sink(catalog_options) as sink:
        sink(_batch(spark, ["pay-in", "pay-in"]), 0)
    with _sink(catalog_options) as restarted:  # a new sink object on the same catalog
        restarted(_batch(spark, ["pay.in"], start=10), 1)
        assert _kinds(catalog_from_options(catalog_options), "ev.pay_in") == ["pay-in"] * 2  # not mixed
        restarted(_batch(spark, ["pay-in"], start=11), 2)
    with _sink(catalog_options, sink_id="other") as other:  # another sink, with its own sink id
        other(_batch(spark, ["PAY_IN", "fresh"], start=20), 0)
        assert _kinds(catalog_from_options(catalog_options), "ev.pay_in") == ["pay-in"] * 3
    catalog = catalog_from_options(catalog_options)
    assert _kinds(catalog, "ev.pay_in") == ["pay-in"] * 3
    assert _kinds(catalog, "ev.fresh") == ["fresh"]
    dead = _dead(catalog)
    assert sorted((d["sink_id"], d["batch_id"], d["value"]) for d in dead) == [
        ("names", 1, "pay.in"),
        ("other", 0, "PAY_IN"),
    ]
    assert all("which holds the rows of 'pay-in'" in d["reason"] for d in dead)


def test_values_too_long_for_a_table_name_are_dead_letters_and_make_no_table(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    kinds = ["x" * 250, "y" * 300, "z" * 125, "", None, "ok"]
    with _sink(catalog_options) as sink:
        sink(_batch(spark, kinds), 0)
        sink(_batch(spark, ["ok", "x" * 250, "Routed--DLQ"], start=10), 1)  # the stream goes on
        sink(_batch(spark, ["ok", "x" * 250, "Routed--DLQ"], start=10), 1)  # a replay writes nothing again
    catalog = catalog_from_options(catalog_options)
    assert sorted(t[1] for t in catalog.list_tables("ev")) == ["ok", "routed__dlq", "z" * 125]
    assert _kinds(catalog, "ev.ok") == ["ok", "ok"]
    dead = _dead(catalog)
    assert len(dead) == 6 and {d["reason"].split(":")[0] for d in dead} == {"unroutable"}
    reasons = {d["value"][:5]: d["reason"] for d in dead}
    assert "makes a table name of 253 bytes, over the 128" in reasons["xxxxx"]
    assert "the sink's dead-letter table" in reasons["Route"]
    assert reasons[""] == "unroutable: the destination value is empty"
    assert reasons["null"] == "unroutable: the destination value is null"


def test_route_max_tables_bounds_the_tables_across_restarts(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    with _sink(catalog_options, **{"route.max-tables": "2"}) as sink:
        sink(_batch(spark, ["a", "b", "c", "a"]), 0)
        sink(_batch(spark, ["a", "b", "c", "a"]), 0)  # a replay writes nothing again
    labels = {"table": "ev.{value}", "reason": "too_many_tables"}
    assert sink.metrics.registry.get_sample_value("icesink_dead_letter_reasons_total", labels) == 1
    with _sink(catalog_options, **{"route.max-tables": "2"}) as restarted:
        restarted(_batch(spark, ["d", "b"], start=10), 1)  # the two tables are counted in the catalog
    catalog = catalog_from_options(catalog_options)
    assert sorted(t[1] for t in catalog.list_tables("ev")) == ["a", "b", "routed__dlq"]
    assert _kinds(catalog, "ev.a") == ["a", "a"] and _kinds(catalog, "ev.b") == ["b", "b"]
    dead = _dead(catalog)
    assert [(d["batch_id"], d["value"]) for d in dead] == [(0, "c"), (1, "d")]
    assert dead[0]["reason"].startswith("too_many_tables: value 'c' would make table ev.c, past the 2 tables")
    assert restarted.metrics.registry.get_sample_value("icesink_dead_letter_reasons_total", labels) == 1


def test_a_template_of_the_value_alone_takes_whole_table_names(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {"route.table-template": "{value}", "dead-letter.table": DLQ}
    with _sink(catalog_options, **options) as sink:
        sink(_batch(spark, ["ev.clicks", "EV.Clicks", "web-2.views", "clicks", "a.b.c", ".x"]), 0)
    catalog = catalog_from_options(catalog_options)
    assert _kinds(catalog, "ev.clicks") == ["EV.Clicks"]  # sorted first: it owns the table
    assert _kinds(catalog, "web_2.views") == ["web-2.views"]
    dead = _dead(catalog)
    assert sorted(d["value"] for d in dead) == [".x", "a.b.c", "clicks", "ev.clicks"]
    reasons = {d["value"]: d["reason"] for d in dead}
    assert "is not a table name 'namespace.table'" in reasons["clicks"]
    assert "both make table ev.clicks" in reasons["ev.clicks"]
