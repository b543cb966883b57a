"""Protobuf field numbers as identities: older schemas read under the newest names, numbers as source ids."""

from __future__ import annotations

from typing import Any

from icesink.jobs.kafka.decode.protobuf_numbers import ProtobufNumbers
from icesink.jobs.kafka.decode.protobuf_payloads import ProtobufReader
from icesink.jobs.kafka.decode.protobuf_values import file_descriptor_set
from icesink.jobs.kafka.decode.registry import PROTOBUF, RegisteredSchema

V1 = """
syntax = "proto3";
package shop;
message Order {
  message Address { string town = 1; }
  int64 id = 1;
  int32 cust = 2;
  Address address = 3;
  repeated string tags = 4;
}
"""
V2 = V1.replace("int32 cust = 2", "int32 customer = 2").replace("string town = 1", "string city = 1")


def compiled(text: str) -> bytes:
    return file_descriptor_set(RegisteredSchema(0, PROTOBUF, text))


def order(file_set: bytes, **fields: Any) -> bytes:
    """An ``Order`` of ``file_set`` framed with message indexes [0] (the header left out)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(file_set).file:
        pool.Add(file)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))(**fields)
    return b"\x00" + bytes(message.SerializeToString())


def test_an_older_schema_is_read_under_the_newest_names_of_its_numbers() -> None:
    v1, v2 = compiled(V1), compiled(V2)
    numbers = ProtobufNumbers()
    numbers.learn(2, v2)
    numbers.learn(1, v1)  # learned later, older: its names do not win
    assert numbers.renamed(v2) == v2
    reader = ProtobufReader({1: numbers.renamed(v1)})
    payload = order(v1, id=7, cust=3, address={"town": "Oslo"})
    assert reader.to_json(1, payload) == b'{"id": 7, "customer": 3, "address": {"city": "Oslo"}, "tags": []}'


def test_the_numbers_of_the_first_message_and_its_nested_messages_are_source_ids() -> None:
    assert ProtobufNumbers().source_ids(compiled(V2)) == (
        (("id",), "protobuf:1"),
        (("customer",), "protobuf:2"),
        (("address",), "protobuf:3"),
        (("address", "city"), "protobuf:1"),
        (("tags",), "protobuf:4"),
    )
