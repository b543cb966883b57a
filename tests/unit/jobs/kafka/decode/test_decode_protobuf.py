"""Protobuf values framed for a schema registry, without Spark: message indexes, the schemas
compiled by protoc, and the decoding pass reading the payloads (bad ones to dead letters)."""

from __future__ import annotations

import base64
import datetime as dt
import logging
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from icesink.jobs.kafka.decode.passes import DATA, REJECTED
from icesink.jobs.kafka.decode.protobuf_payloads import message_indexes
from icesink.jobs.kafka.decode.protobuf_values import ProtobufValues, file_descriptor_set
from icesink.jobs.kafka.decode.registry import PROTOBUF, RegisteredSchema, SchemaRegistry
from icesink.jobs.kafka.decode.spec import DecodeSpec
from icesink.jobs.kafka.decode.task import decode_function
from tests.support.apicurio_registry import ApicurioRegistry
from tests.support.schema_registry import framed

T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
SHOP = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";

message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; int64 units = 2; }
  int64 id = 1;
  int32 qty = 2;
  string note = 3;
  Status status = 4;
  google.protobuf.Timestamp at = 5;
  optional string coupon = 6;
  repeated Line lines = 7;
}
message Refund { int64 order_id = 1; }
"""


def classes(file_set: bytes) -> dict[str, Any]:
    """The message classes of a compiled schema, by full name (as a producer has them)."""
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(file_set).file:
        pool.Add(file)
    names = ["shop.Order", "shop.Order.Line", "shop.Refund"]
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n)) for n in names}


def passed(spec: DecodeSpec, values: list[bytes]) -> tuple[list[dict[str, Any]], dict[int, str]]:
    n = len(values)
    batch = pa.record_batch(
        {
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["orders"] * n),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([T0] * n, pa.timestamp("us", tz="UTC")),
        }
    )
    rows: list[dict[str, Any]] = []
    rejected: dict[int, str] = {}
    for out in decode_function(spec)(iter([batch])):
        for kind, payload in zip(
            out.column("kind").to_pylist(), out.column("payload").to_pylist(), strict=True
        ):
            table = pa.ipc.open_stream(payload).read_all().to_pylist()
            if kind == DATA:
                rows.extend(table)
            elif kind == REJECTED:
                rejected.update({r["offset"]: str(r["message"]) for r in table})
    return rows, rejected


def test_message_indexes_are_zigzag_varints_and_a_single_zero_is_the_first_message() -> None:
    assert message_indexes(b"\x00rest") == ([0], 1)
    assert message_indexes(b"\x02\x02") == ([1], 2)  # count 1, index 1
    assert message_indexes(b"\x04\x00\x02") == ([0, 1], 3)
    assert message_indexes(b"\x02\xac\x02") == ([150], 3)  # a two-byte varint
    with pytest.raises(ValueError, match="ends inside"):
        message_indexes(b"\x04\x00")
    with pytest.raises(ValueError, match="count of -1"):
        message_indexes(b"\x01")


def test_protobuf_values_decode_to_rows_and_bad_ones_become_dead_letters_with_reasons() -> None:
    compiled = file_descriptor_set(RegisteredSchema(1, PROTOBUF, SHOP))
    by_name = classes(compiled)
    order = by_name["shop.Order"](id=2**60, qty=0, note="first", status=1)
    order.at.FromDatetime(dt.datetime(2024, 5, 1, 12, 0))
    order.lines.add(sku="a", units=3)
    plain = by_name["shop.Order"](id=7, qty=2, coupon="X")
    values = [
        framed(1, b"\x00" + order.SerializeToString()),
        framed(1, b"\x00" + plain.SerializeToString()),
        framed(1, b"\x02\x02" + by_name["shop.Refund"](order_id=9).SerializeToString()),
        framed(1, b"\x04\x00\x00" + by_name["shop.Order.Line"](sku="z").SerializeToString()),
        framed(1, b"\x02\x0a" + plain.SerializeToString()),  # message index 5: no such message
        framed(1, b"\x00\x0a\xff"),  # bytes that are not an Order
        framed(1, b"\x04\x00"),  # cut inside the message indexes
        framed(2, b"\x00\x08\x01"),  # a schema the job cannot read
    ]
    spec = DecodeSpec(
        framing="protobuf",
        schema_ids=frozenset({1}),
        task_schemas=((1, compiled),),
        schema_errors=((2, "it imports other.proto"),),
    )
    rows, rejected = passed(spec, values)

    by_offset = {r["_kafka_offset"]: r for r in rows}
    assert sorted(by_offset) == [0, 1, 2, 3]
    first = by_offset[0]
    assert (first["id"], first["qty"], first["note"], first["status"]) == (2**60, 0, "first", "PAID")
    assert first["coupon"] is None  # optional and unset: null, where qty's 0 is 0
    assert first["lines"] == [{"sku": "a", "units": 3}]
    assert str(first["at"]).startswith("2024-05-01")
    assert (by_offset[1]["id"], by_offset[1]["note"], by_offset[1]["coupon"]) == (7, "", "X")
    assert by_offset[2]["order_id"] == 9
    assert by_offset[3]["sku"] == "z"
    assert sorted(rejected) == [4, 5, 6, 7]
    assert "message index [5]: the schema has 2 top-level messages" in rejected[4]
    assert "not a Protobuf shop.Order" in rejected[5]
    assert "ends inside its message indexes" in rejected[6]
    assert "schema id 2 is not read: it imports other.proto" in rejected[7]


def test_the_spec_carries_compiled_schemas_to_a_source() -> None:
    spec = DecodeSpec(
        framing="protobuf",
        schema_ids=frozenset({1}),
        task_schemas=((1, b"\x00\xff"),),
        schema_errors=((2, "why"),),
    )
    assert DecodeSpec.from_json(spec.to_json()) == spec


def test_a_descriptor_registered_in_base64_reads_as_its_proto_text_does() -> None:
    from_text = descriptor_pb2.FileDescriptorSet.FromString(
        file_descriptor_set(RegisteredSchema(1, PROTOBUF, SHOP))
    )
    own = from_text.file[-1]
    as_registered = base64.b64encode(own.SerializeToString()).decode()  # confluent-kafka's serializer
    from_base64 = descriptor_pb2.FileDescriptorSet.FromString(
        file_descriptor_set(RegisteredSchema(2, PROTOBUF, as_registered))
    )
    assert [f.name for f in from_base64.file] == ["google/protobuf/timestamp.proto", own.name]
    assert from_base64.file[-1] == own


def test_schemas_the_job_cannot_read_are_refused_with_the_reason() -> None:
    values = ProtobufValues()
    found = values.task_schemas(
        {
            1: RegisteredSchema(1, PROTOBUF, SHOP),
            2: RegisteredSchema(2, PROTOBUF, 'syntax = "proto3"; import "other.proto"; message M {}'),
            3: RegisteredSchema(3, PROTOBUF, 'syntax = "proto3"; message M { int32 a = 1 }'),
        }
    )
    assert isinstance(found[1], bytes)
    assert "protoc could not compile" in str(found[2]) and "other.proto" in str(found[2])
    assert "protoc could not compile" in str(found[3])


def test_a_schema_importing_another_subjects_schema_reads_with_its_reference(
    schema_registry: ApicurioRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    schema_registry.register("refs-money", MONEY, PROTOBUF)
    reference = {"name": "shop/money.proto", "subject": "refs-money", "version": 1}
    priced = schema_registry.register("refs-prices-value", PRICED, PROTOBUF, [reference])
    schema_registry.register("refs-tax", TAX, PROTOBUF)
    taxed = schema_registry.register(
        "refs-taxes-value", TAXED, PROTOBUF, [{"name": "shop/tax.proto", "subject": "refs-tax", "version": 1}]
    )
    schema_registry.delete_version("refs-tax", 1)  # a version a schema references, gone
    with caplog.at_level(logging.WARNING, logger="icesink.jobs.kafka.decode.registry"):
        schemas = SchemaRegistry(schema_registry.url, timeout_s=5).schemas([priced, taxed])
    assert schemas[priced].references == (("shop/money.proto", MONEY),)
    assert taxed not in schemas  # Apicurio answers 404 for the id: its values are dead letters
    assert f"no readable schema of id {taxed} (HTTP 404, error code 40402)" in caplog.text
    compiled = ProtobufValues().task_schemas(schemas)[priced]
    assert isinstance(compiled, bytes)

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(compiled).file:
        pool.Add(file)
    price = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Price"))
    value = price(sku="a", amount={"currency": "EUR", "cents": 250})
    spec = DecodeSpec(framing="protobuf", schema_ids=frozenset({priced}), task_schemas=((priced, compiled),))
    rows, rejected = passed(spec, [framed(priced, b"\x00" + value.SerializeToString())])
    assert not rejected
    assert [(r["sku"], r["amount"]) for r in rows] == [("a", {"currency": "EUR", "cents": 250})]


def test_a_reference_the_registry_no_longer_holds_is_named_by_the_compiler() -> None:
    found = ProtobufValues().task_schemas({3: RegisteredSchema(3, PROTOBUF, TAXED)})  # as Confluent's answers
    assert "protoc could not compile" in str(found[3]) and "shop/tax.proto" in str(found[3])


MONEY = 'syntax = "proto3"; package shop; message Money { string currency = 1; int64 cents = 2; }'
PRICED = """syntax = "proto3"; package shop; import "shop/money.proto";
message Price { string sku = 1; Money amount = 2; }"""
TAX = 'syntax = "proto3"; package shop; message Tax { int64 cents = 1; }'
TAXED = """syntax = "proto3"; package shop; import "shop/tax.proto";
message Taxed { Tax tax = 1; }"""


def test_a_message_protobufs_json_printer_cannot_print_is_a_dead_letter_not_a_failed_task() -> None:
    text = 'syntax = "proto3"; import "google/protobuf/any.proto"; message W { google.protobuf.Any x = 1; }'
    compiled = file_descriptor_set(RegisteredSchema(1, PROTOBUF, text))
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(compiled).file:
        pool.Add(file)
    wrapper = message_factory.GetMessageClass(pool.FindMessageTypeByName("W"))
    value = wrapper()
    value.x.type_url = "type.googleapis.com/no.Such"  # a type the schema does not know
    spec = DecodeSpec(framing="protobuf", schema_ids=frozenset({1}), task_schemas=((1, compiled),))
    rows, rejected = passed(spec, [framed(1, b"\x00" + value.SerializeToString()), framed(1, b"\x00")])
    assert [r["_kafka_offset"] for r in rows] == [1]
    assert "not a Protobuf value of schema id 1" in rejected[0] and "no.Such" in rejected[0]
