"""Renamed fields (``icesink.renamed-from``, ``icesink.source-id``): the diff, the coordinator on SQLite."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType, StructType
from pyspark.sql import types as st

from icesink.config import CommitConfig
from icesink.errors import RenameConflictError
from icesink.schema.coordinator import SchemaCheck, SchemaCoordinator
from icesink.schema.diff import AddColumn, WidenType, diff_schema, match_fields
from icesink.schema.renames import RENAMED_FROM, RenameColumn, match_renamed, renamed_from
from icesink.schema.source_ids import SOURCE_ID, doc_source_id

TABLE = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "cust", IntegerType()),
    NestedField(3, "address", StructType(NestedField(4, "town", StringType()))),
)


def field(name: str, data_type: st.DataType, *old: str) -> st.StructField:
    return st.StructField(name, data_type, True, {RENAMED_FROM: list(old)} if old else {})


def batch(*fields: st.StructField) -> st.StructType:
    return st.StructType([st.StructField("id", st.LongType(), False), *fields])


def test_metadata_takes_a_name_or_a_list() -> None:
    assert renamed_from(st.StructField("a", st.LongType(), True, {RENAMED_FROM: "b"})) == ("b",)
    assert renamed_from(field("a", st.LongType(), "b", "c")) == ("b", "c")
    assert renamed_from(st.StructField("a", st.LongType())) == ()


def test_a_renamed_field_renames_its_column_and_widens_it_under_the_old_name() -> None:
    changes = diff_schema(TABLE, batch(field("customer", st.LongType(), "gone", "cust")))
    assert changes == [RenameColumn((), "cust", "customer"), WidenType(("cust",), IntegerType(), LongType())]


def test_a_struct_member_is_renamed_in_its_struct() -> None:
    address = st.StructType([field("city", st.StringType(), "town")])
    changes = diff_schema(TABLE, batch(st.StructField("address", address)))
    assert changes == [RenameColumn(("address",), "town", "city")]


def test_done_already_or_unknown_old_names_are_no_rename() -> None:
    renamed = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "customer", IntegerType())
    )
    assert diff_schema(renamed, batch(field("customer", st.IntegerType(), "cust"))) == []
    changes = diff_schema(TABLE, batch(field("email", st.StringType(), "mail")))
    assert changes == [AddColumn((), "email", StringType())]


def test_the_old_name_offered_too_is_no_rename() -> None:
    changes = diff_schema(
        TABLE, batch(st.StructField("cust", st.IntegerType()), field("c2", st.IntegerType(), "cust"))
    )
    assert changes == [AddColumn((), "c2", IntegerType())]


def test_a_rename_to_another_columns_name_is_a_conflict_the_diff_leaves_alone() -> None:
    table = Schema(*TABLE.fields, NestedField(5, "customer", StringType()))
    batch_schema = batch(field("customer", st.LongType(), "cust"))
    assert diff_schema(table, batch_schema) == []  # not widened: these are not the column's values
    fields = list(batch_schema.fields)
    matched, extra = match_fields(table.fields, fields, (), False)
    renamed = match_renamed(table.fields, fields, matched, extra, (), False, "db.t")
    conflict = renamed.conflicts[1]
    error = str(conflict.error("db.t"))
    assert error.startswith("ICESINK-RENAME-CONFLICT: batch column 'customer' is renamed from 'cust'")
    assert "both 'customer' and 'cust'" in error and "hint: drop or rename one of the two" in error


def test_two_old_names_that_are_two_columns_fail() -> None:
    table = Schema(*TABLE.fields, NestedField(5, "c2", IntegerType()))
    with pytest.raises(RenameConflictError, match="'customer' is renamed from 'cust', 'c2'"):
        diff_schema(table, batch(field("customer", st.IntegerType(), "cust", "c2")))


def test_the_coordinator_renames_once_keeping_the_field_id(tmp_path: Path) -> None:
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    arrow = pa.schema([pa.field("id", pa.int64()), pa.field("cust", pa.int32())])
    table = catalog.create_table("db.t", arrow)
    table.append(pa.table({"id": [1], "cust": [7]}, schema=arrow))
    old_id = table.schema().find_field("cust").field_id
    renamed = batch(field("customer", st.LongType(), "cust"))
    retry = CommitConfig(retries=1, min_wait_ms=1)

    outcome = SchemaCoordinator("db.t").evolve(table, renamed, retry=retry)
    assert outcome.check is SchemaCheck.EVOLVED
    assert [str(c) for c in outcome.changes] == [
        "rename column cust to customer",
        "widen cust from int to long",
    ]
    fresh = catalog.load_table("db.t")
    assert fresh.schema().find_field("customer").field_id == old_id
    assert fresh.schema().find_field("customer").field_type == LongType()
    assert fresh.scan().to_arrow().to_pylist() == [
        {"id": 1, "customer": 7}
    ]  # the data kept its name's new name
    again = SchemaCoordinator("db.t").evolve(catalog.load_table("db.t"), renamed, retry=retry)  # a replay
    assert again.check is SchemaCheck.UNCHANGED
    assert len(catalog.load_table("db.t").metadata.schemas) == 2


def numbered(name: str, data_type: st.DataType, number: int) -> st.StructField:
    return st.StructField(name, data_type, True, {SOURCE_ID: f"protobuf:{number}"})


def test_a_source_id_is_kept_in_the_doc_and_identifies_the_column_under_a_new_name(tmp_path: Path) -> None:
    catalog = SqlCatalog("test", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    arrow = pa.schema([pa.field("id", pa.int64()), pa.field("cust", pa.int32())])
    table = catalog.create_table("db.t", arrow)
    retry = CommitConfig(retries=1, min_wait_ms=1)
    coordinator = SchemaCoordinator("db.t")
    v1 = st.StructType([numbered("id", st.LongType(), 1), numbered("cust", st.IntegerType(), 2)])
    first = coordinator.evolve(table, v1, retry=retry)  # the columns learn their numbers
    assert [str(c) for c in first.changes] == [
        "record source id protobuf:1 of id",
        "record source id protobuf:2 of cust",
    ]
    assert catalog.load_table("db.t").schema().find_field("cust").doc == "[icesink.source-id=protobuf:2]"

    v2 = st.StructType(
        [*v1.fields[:1], numbered("customer", st.IntegerType(), 2), numbered("note", st.StringType(), 3)]
    )
    second = coordinator.evolve(catalog.load_table("db.t"), v2, retry=retry)
    assert [str(c) for c in second.changes] == ["rename column cust to customer", "add column note string"]
    schema = catalog.load_table("db.t").schema()
    assert schema.find_field("customer").field_id == table.schema().find_field("cust").field_id
    assert doc_source_id(schema.find_field("note").doc) == "protobuf:3"
    assert diff_schema(schema, v2) == []  # done: a replay, a later batch

    taken = st.StructType([*v2.fields[:2], numbered("customer2", st.IntegerType(), 2)])
    assert [str(c) for c in diff_schema(schema, taken)] == ["add column customer2 int"]  # number 2 is offered


def test_a_source_id_kept_by_another_column_is_a_conflict() -> None:
    table = Schema(
        NestedField(1, "cust", IntegerType(), doc="client [icesink.source-id=protobuf:2]"),
        NestedField(2, "customer", IntegerType()),
    )
    batch_schema = st.StructType([numbered("customer", st.IntegerType(), 2)])
    fields = list(batch_schema.fields)
    matched, extra = match_fields(table.fields, fields, (), False)
    renamed = match_renamed(table.fields, fields, matched, extra, (), False)
    assert renamed.conflicts[0].others == ("cust",)
    assert diff_schema(table, batch_schema) == []


def test_a_table_created_from_a_batch_keeps_its_source_ids_from_the_start() -> None:
    from icesink.schema.source_ids import with_source_id_docs
    from icesink.type_mapping import spark_to_iceberg_schema

    inner = st.StructType([numbered("city", st.StringType(), 1)])
    spark = st.StructType(
        [numbered("id", st.LongType(), 1), st.StructField("address", inner, True, {"comment": "where"})]
    )
    schema = with_source_id_docs(spark_to_iceberg_schema(spark), spark)
    assert schema.find_field("id").doc == "[icesink.source-id=protobuf:1]"
    assert schema.find_field("address").doc == "where"
    assert schema.find_field("address.city").doc == "[icesink.source-id=protobuf:1]"
    assert diff_schema(schema, spark) == []  # nothing to record on the first batch
