"""A batch field renamed from a column (``icesink.renamed-from``) renames the column, keeping its data."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink, failpoints
from icesink.schema.renames import RENAMED_FROM
from tests.support.duckdb_reader import duckdb_read
from tests.support.tables import row_multiset, table_rows

OLD = "id bigint, cust int, address struct<town:string>"


def renamed(spark: SparkSession, ids: range) -> DataFrame:
    """Rows whose ``customer`` was ``cust`` (now a long) and whose ``address.city`` was ``town``."""
    address = st.StructType([st.StructField("city", st.StringType(), True, {RENAMED_FROM: "town"})])
    schema = st.StructType(
        [
            st.StructField("id", st.LongType()),
            st.StructField("customer", st.LongType(), True, {RENAMED_FROM: ["cust"]}),
            st.StructField("address", address),
        ]
    )
    return spark.createDataFrame([(i, 2**40 + i, (f"c{i}",)) for i in ids], schema)


def test_renamed_fields_rename_their_columns_once_and_keep_the_data(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.people", "sink-id": "people"})
    sink(spark.createDataFrame([(i, i, (f"t{i}",)) for i in range(3)], OLD), 0)
    before = sink.catalog.load_table("db.people").schema()

    failpoints.arm("normalize", "raise")  # the rename is committed, the batch's rows are not
    try:
        with pytest.raises(failpoints.InjectedFault):
            sink(renamed(spark, range(3, 6)), 1)
    finally:
        failpoints.disarm_all()
    sink(renamed(spark, range(3, 6)), 1)  # the replay finds the columns renamed
    sink(renamed(spark, range(6, 8)), 2)  # a later batch with the same renames
    sink(renamed(spark, range(6, 8)), 2)  # replayed once more: skipped

    table = sink.catalog.load_table("db.people")
    schema = table.schema()
    assert [f.name for f in schema.fields] == ["id", "customer", "address"]
    assert schema.find_field("customer").field_id == before.find_field("cust").field_id
    assert schema.find_field("address.city").field_id == before.find_field("address.town").field_id
    assert len(table.metadata.schemas) == 2  # one evolution: the renames (and the widening) at once
    flat = [(i, i, f"t{i}") for i in range(3)] + [(i, 2**40 + i, f"c{i}") for i in range(3, 8)]
    expected = [{"id": i, "customer": c, "address": {"city": city}} for i, c, city in flat]
    assert row_multiset(table_rows(table)) == row_multiset(expected)
    read = duckdb_read(table.metadata_location, "SELECT id, customer, address.city AS city FROM t")
    assert sorted(tuple(r.values()) for r in read.to_pylist()) == flat
    changes = sink.metrics.registry.get_sample_value(
        "icesink_schema_changes_total", {"table": "db.people", "kind": "rename_column"}
    )
    assert changes == 2


def test_a_rename_to_another_columns_name_sends_the_batch_to_dead_letters(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.both", "sink-id": "both"})
    sink(spark.createDataFrame([(0, 1, 2)], "id bigint, cust int, customer bigint"), 0)
    fields = [
        st.StructField("id", st.LongType()),
        st.StructField("customer", st.LongType(), True, {RENAMED_FROM: "cust"}),
    ]
    sink(spark.createDataFrame([(1, 10), (2, 20)], st.StructType(fields)), 1)
    sink(spark.createDataFrame([(3, 3, 30)], "id bigint, cust int, customer bigint"), 2)  # the stream goes on

    table = sink.catalog.load_table("db.both")
    assert [f.name for f in table.schema().fields] == ["id", "cust", "customer"]
    assert sorted(r["id"] for r in table_rows(table)) == [0, 3]
    dead = table_rows(sink.catalog.load_table("db.both__dlq"))
    assert sorted(r["original_row"] for r in dead) == ['{"id":1,"customer":10}', '{"id":2,"customer":20}']
    reason = dead[0]["reason"]
    assert reason.startswith("rename_conflict: ICESINK-RENAME-CONFLICT: batch column 'customer' is renamed")
    assert "both 'customer' and 'cust'" in reason and "hint: drop or rename one of the two" in reason
    labels = {"table": "db.both", "reason": "rename_conflict"}
    assert sink.metrics.registry.get_sample_value("icesink_dead_letter_reasons_total", labels) == 2


def test_a_routed_batch_renames_in_one_table_and_dead_letters_the_conflict_of_another(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    routing = {
        "sink-id": "routed",
        "route.by": "field",
        "route.field": "type",
        "route.table-template": "ev.{value}",
    }
    sink = IcebergSink.from_options({**catalog_options, **routing})
    first = [(0, "a", 1, None), (1, "b", 2, 20)]
    sink(spark.createDataFrame(first, "id bigint, type string, cust int, customer bigint"), 0)
    fields = [
        st.StructField("id", st.LongType()),
        st.StructField("type", st.StringType()),
        st.StructField("customer", st.LongType(), True, {RENAMED_FROM: "cust"}),
    ]
    sink(spark.createDataFrame([(2, "a", 3), (3, "b", 30)], st.StructType(fields)), 1)

    a, b = sink.catalog.load_table("ev.a"), sink.catalog.load_table("ev.b")
    assert [f.name for f in a.schema().fields] == ["id", "type", "customer"]  # a's cust, renamed
    assert sorted((r["id"], r["customer"]) for r in table_rows(a)) == [(0, 1), (2, 3)]
    assert [f.name for f in b.schema().fields] == ["id", "type", "cust", "customer"]  # b has both
    assert [r["id"] for r in table_rows(b)] == [1]
    dead = table_rows(sink.catalog.load_table("ev.routed__dlq"))
    assert [(r["source_table"], r["reason"].split(":")[0]) for r in dead] == [("ev.b", "rename_conflict")]
