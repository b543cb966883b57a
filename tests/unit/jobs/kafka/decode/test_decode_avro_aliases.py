"""Avro aliases as renames: the reader schema of older versions, the rows' renamed-from metadata."""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import types as st

from icesink import RENAMED_FROM, SOURCE_ID
from icesink.jobs.kafka.decode.avro_aliases import AvroAliases
from icesink.jobs.kafka.decode.registry_values import mark_renamed
from icesink.jobs.kafka.decode.spec import DecodeSpec


def record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "fields": list(fields)}


ADDRESS_V1 = record({"name": "town", "type": "string"})
V1 = record({"name": "cust", "type": "int"}, {"name": "address", "type": ["null", ADDRESS_V1]})
ADDRESS_V2 = record({"name": "city", "type": "string", "aliases": ["town"]})
V2 = record(
    {"name": "customer", "type": "long", "aliases": ["cust"]},
    {"name": "address", "type": ["null", ADDRESS_V2]},
)
V3 = record({"name": "client", "type": "long", "aliases": ["customer", "cust"]})


def test_aliases_rename_fields_and_struct_members() -> None:
    aliases = AvroAliases()
    aliases.learn(1, json.dumps(V1))
    assert aliases.renamed() == ()
    aliases.learn(2, json.dumps(V2))
    assert aliases.renamed() == ((("address", "city"), ("town",)), (("customer",), ("cust",)))


def test_an_older_writer_is_read_under_the_newest_names() -> None:
    aliases = AvroAliases()
    aliases.learn(2, json.dumps(V2))
    reader = aliases.reader(V1)
    assert [(f["name"], f.get("aliases")) for f in reader["fields"]] == [
        ("customer", ["cust"]),
        ("address", None),
    ]
    assert reader["fields"][1]["type"][1]["fields"][0] == {
        "name": "city",
        "type": "string",
        "aliases": ["town"],
    }
    assert aliases.reader(V2) == V2  # the newest writer is read as it is


def test_a_chain_of_renames_ends_at_the_newest_name_whatever_the_order_learned() -> None:
    aliases = AvroAliases()
    aliases.learn(3, json.dumps(V3))
    aliases.learn(2, json.dumps(V2))
    assert aliases.current((), "cust") == "client"
    assert (("client",), ("cust", "customer")) in aliases.renamed()
    assert [f["name"] for f in aliases.reader(V2)["fields"]] == ["client", "address"]


def test_mark_renamed_sets_the_metadata_on_the_renamed_fields_only() -> None:
    address = st.StructType([st.StructField("city", st.StringType())])
    schema = st.StructType([st.StructField("customer", st.LongType()), st.StructField("address", address)])
    renamed = ((("address", "city"), ("town",)), (("customer",), ("cust",)))
    marked = mark_renamed(
        schema, DecodeSpec(renamed_from=renamed, source_ids=((("customer",), "protobuf:2"),))
    )
    assert marked["customer"].metadata == {RENAMED_FROM: ["cust"], SOURCE_ID: "protobuf:2"}
    nested = marked["address"].dataType
    assert isinstance(nested, st.StructType)
    assert nested["city"].metadata == {RENAMED_FROM: ["town"]}
    assert marked["address"].metadata == {}
    assert mark_renamed(schema, DecodeSpec()) is schema


def test_a_debezium_envelopes_row_fields_are_the_rows() -> None:
    schema = st.StructType(
        [st.StructField("customer", st.LongType()), st.StructField("_op", st.StringType())]
    )
    spec = DecodeSpec(debezium=True, renamed_from=((("before", "customer"), ("cust",)),))
    assert mark_renamed(schema, spec)["customer"].metadata == {RENAMED_FROM: ["cust"]}
