"""Values framed for a schema registry on real local Spark: JSON Schema values (a value of another
format's schema id a dead letter) and Protobuf values of confluent-kafka's serializer (bad ones
dead letters); Avro values, a schema change mid-stream and Debezium Avro upserts: the job on
Apache Kafka, ``tests/e2e/test_kafka_registry.py``."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from icesink import IcebergSink
from icesink.jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat
from icesink.jobs.kafka.decode.protobuf_values import file_descriptor_set
from icesink.jobs.kafka.decode.registry import JSON, PROTOBUF, RegisteredSchema, SchemaRegistry
from tests.support.apicurio_registry import ApicurioRegistry
from tests.support.schema_registry import avro_framed, framed
from tests.support.tables import catalog_from_options

KAFKA_DDL = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": "string"},
    ],
}


def kafka_batch(spark: Any, values: Sequence[bytes | None], first_offset: int = 0) -> Any:
    rows = [
        (None, value, "orders", 0, offset, T0 + dt.timedelta(seconds=offset))
        for offset, value in enumerate(values, start=first_offset)
    ]
    return spark.createDataFrame(rows, KAFKA_DDL)


def read(options: dict[str, str], table: str) -> list[dict[str, Any]]:
    return catalog_from_options(options).load_table(table).scan().to_arrow().to_pylist()


def decoding_sink(options: dict[str, str], registry: ApicurioRegistry, **decode: Any) -> DecodingSink:
    decoder = ValueDecoder(DecodeOptions(registry=SchemaRegistry(registry.url, timeout_s=10), **decode))
    return DecodingSink(IcebergSink.from_options(options), decoder)


def dead_letter_errors(options: dict[str, str], table: str) -> dict[int, str]:
    originals = [json.loads(d["original_row"]) for d in read(options, table)]
    return {o["_kafka_offset"]: o["error"] for o in originals}


def test_json_schema_values_and_an_unknown_schema_type(
    spark: Any, catalog_options: dict[str, str], schema_registry: ApicurioRegistry
) -> None:
    options = {**catalog_options, "table": "db.json_users", "sink-id": "json-users"}
    schema_id = schema_registry.register(
        "users-value", {"type": "object", "properties": {"id": {"type": "integer"}}}, JSON
    )
    avro_id = schema_registry.register("other-value", ORDER_V1)
    values = [framed(schema_id, json.dumps({"id": i, "name": f"u{i}"}).encode()) for i in range(3)]
    values.append(framed(avro_id, b'{"id": 9}'))  # a schema id of another format
    decoding_sink(options, schema_registry, format=ValueFormat.JSON_SCHEMA)(kafka_batch(spark, values), 0)

    assert sorted((r["id"], r["name"]) for r in read(options, "db.json_users")) == [
        (0, "u0"),
        (1, "u1"),
        (2, "u2"),
    ]
    assert f"unknown schema id {avro_id}" in dead_letter_errors(options, "db.json_users__dlq")[3]


ORDER_PROTO = """
syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  int32 qty = 2;
  optional string note = 3;
}
"""


def order_class() -> Any:
    """The ``shop.Order`` message class, built from the ``.proto`` text as a producer's would be."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    compiled = file_descriptor_set(RegisteredSchema(0, PROTOBUF, ORDER_PROTO))
    for file in descriptor_pb2.FileDescriptorSet.FromString(compiled).file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_values_of_confluent_kafkas_serializer(
    spark: Any, catalog_options: dict[str, str], schema_registry: ApicurioRegistry
) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    options = {**catalog_options, "table": "db.pb_orders", "sink-id": "pb-orders"}
    order = order_class()
    serializer = ProtobufSerializer(
        order, SchemaRegistryClient({"url": schema_registry.url}), {"use.deprecated.format": False}
    )
    context = SerializationContext("pb-orders", MessageField.VALUE)
    values = [
        serializer(order(id=2**60 + i, qty=i, **({"note": f"n{i}"} if i else {})), context) for i in range(3)
    ]
    schema_id = int.from_bytes(values[0][1:5], "big")
    values.append(framed(schema_id, b"\x02\x06" + order(id=9).SerializeToString()))  # message 3: none
    values.append(framed(schema_id, b"\x00\x0a\xff"))  # not an Order
    decoding_sink(options, schema_registry, format=ValueFormat.PROTOBUF)(kafka_batch(spark, values), 0)

    rows = sorted(read(options, "db.pb_orders"), key=lambda r: r["id"])
    assert [(r["id"], r["qty"], r["note"]) for r in rows] == [
        (2**60, 0, None),
        (2**60 + 1, 1, "n1"),
        (2**60 + 2, 2, "n2"),
    ]
    errors = dead_letter_errors(options, "db.pb_orders__dlq")
    assert sorted(errors) == [3, 4]
    assert "message index [3]" in errors[3]
    assert "not a Protobuf shop.Order" in errors[4]


def test_avro_values_of_a_schema_with_references_are_dead_letters_and_the_rest_rows(
    spark: Any, catalog_options: dict[str, str], schema_registry: ApicurioRegistry
) -> None:
    options = {**catalog_options, "table": "db.avro_refs", "sink-id": "avro-refs"}
    money = {"type": "record", "name": "Money", "fields": [{"name": "cents", "type": "long"}]}
    schema_registry.register("avro-refs-money", money)
    priced = {"type": "record", "name": "Price", "fields": [{"name": "amount", "type": "Money"}]}
    reference = {"name": "Money", "subject": "avro-refs-money", "version": 1}
    referencing = schema_registry.register("avro-refs-prices-value", priced, references=[reference])
    plain = schema_registry.register("avro-refs-plain-value", money)
    values = [framed(referencing, b"\x04"), framed(plain, b"\x06")]  # cents 2 / 3, zigzag
    decoding_sink(options, schema_registry, format=ValueFormat.AVRO)(kafka_batch(spark, values), 0)

    assert [r["cents"] for r in read(options, "db.avro_refs")] == [3]
    error = dead_letter_errors(options, "db.avro_refs__dlq")[0]
    assert f"schema id {referencing} is not read" in error and "references" in error


def test_an_avro_field_renamed_by_its_aliases_mid_stream_keeps_its_column(
    spark: Any, catalog_options: dict[str, str], schema_registry: ApicurioRegistry
) -> None:
    options = {**catalog_options, "table": "db.avro_renamed", "sink-id": "avro-renamed"}
    v1 = {**ORDER_V1, "fields": [{"name": "id", "type": "int"}, {"name": "cust", "type": "int"}]}
    customer = {"name": "customer", "type": "long", "aliases": ["cust"]}
    v2 = {**ORDER_V1, "fields": [{"name": "id", "type": "int"}, customer]}
    old = avro_framed(schema_registry.url, "renamed", v1, [{"id": i, "cust": i} for i in range(4)])
    new = avro_framed(
        schema_registry.url, "renamed", v2, [{"id": i, "customer": 2**40 + i} for i in range(4, 6)]
    )
    batches = [old[:2], [old[2], *new], old[3:]]  # v2 mid-stream, v1 values after it too
    sink = decoding_sink(options, schema_registry, format=ValueFormat.AVRO)
    for batch_id, values in enumerate(batches):
        sink(kafka_batch(spark, values, first_offset=batch_id * 10), batch_id)

    table = catalog_from_options(options).load_table("db.avro_renamed")
    first = table.schemas()[table.metadata.schemas[0].schema_id]
    assert [f.name for f in table.schema().fields][:2] == ["id", "customer"]
    assert table.schema().find_field("customer").field_id == first.find_field("cust").field_id
    rows = sorted((r["id"], r["customer"]) for r in table.scan().to_arrow().to_pylist())
    assert rows == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 2**40 + 4), (5, 2**40 + 5)]


PB_V1 = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; int32 cust = 2; }\n'
PB_V2 = PB_V1.replace("int32 cust = 2", "int64 customer = 2")


def test_a_protobuf_field_renamed_mid_stream_keeps_its_column_by_its_number(
    spark: Any, catalog_options: dict[str, str], schema_registry: ApicurioRegistry
) -> None:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    def values(text: str, rows: list[dict[str, int]]) -> list[bytes]:
        schema_id = schema_registry.register("pb-renamed-value", text, PROTOBUF)
        pool = descriptor_pool.DescriptorPool()
        compiled = file_descriptor_set(RegisteredSchema(0, PROTOBUF, text))
        for file in descriptor_pb2.FileDescriptorSet.FromString(compiled).file:
            pool.Add(file)
        message = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
        return [framed(schema_id, b"\x00" + message(**row).SerializeToString()) for row in rows]

    options = {**catalog_options, "table": "db.pb_renamed", "sink-id": "pb-renamed"}
    old = values(PB_V1, [{"id": i, "cust": i} for i in range(3)])
    new = values(PB_V2, [{"id": i, "customer": 2**40 + i} for i in range(3, 5)])
    sink = decoding_sink(options, schema_registry, format=ValueFormat.PROTOBUF)
    for batch_id, batch in enumerate([old[:2], [old[2], *new]]):  # v2 mid-stream, with a v1 value
        sink(kafka_batch(spark, batch, first_offset=batch_id * 10), batch_id)

    table = catalog_from_options(options).load_table("db.pb_renamed")
    first = table.schemas()[table.metadata.schemas[0].schema_id]
    customer = table.schema().find_field("customer")
    assert customer.field_id == first.find_field("cust").field_id
    assert customer.doc == "[icesink.source-id=protobuf:2]"  # the number -> column map, in the table
    assert first.find_field("cust").doc == customer.doc  # kept from the table's creation
    assert len(table.metadata.schemas) == 2  # created, then the rename (and the widening)
    assert "cust" not in [f.name for f in table.schema().fields]
    rows = sorted((r["id"], r["customer"]) for r in table.scan().to_arrow().to_pylist())
    assert rows == [(0, 0), (1, 1), (2, 2), (3, 2**40 + 3), (4, 2**40 + 4)]
