"""Values framed for a schema registry on real local Spark: Avro and JSON Schema values in, table
rows and dead letters out, a new schema version evolving the table (Debezium Avro upserts:
``tests/e2e/test_kafka_registry.py``)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from icesink import IcebergSink
from streaming_jobs.kafka.decode import DecodeOptions, DecodingSink, ValueDecoder, ValueFormat
from streaming_jobs.kafka.decode.registry import JSON, SchemaRegistry
from tests.support.schema_registry import SchemaRegistryServer, avro_values, framed
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
ORDER_V2 = {  # qty widened, note made optional, email added
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "qty", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "email", "type": ["null", "string"], "default": None},
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


def decoding_sink(options: dict[str, str], registry: SchemaRegistryServer, **decode: Any) -> DecodingSink:
    decoder = ValueDecoder(DecodeOptions(registry=SchemaRegistry(registry.url, timeout_s=10), **decode))
    return DecodingSink(IcebergSink.from_options(options), decoder)


def dead_letter_errors(options: dict[str, str], table: str) -> dict[int, str]:
    originals = [json.loads(d["original_row"]) for d in read(options, table)]
    return {o["_kafka_offset"]: o["error"] for o in originals}


def test_avro_values_evolve_the_table_and_bad_ones_become_dead_letters(
    spark: Any, catalog_options: dict[str, str], schema_registry: SchemaRegistryServer
) -> None:
    options = {**catalog_options, "table": "db.avro_orders", "sink-id": "avro-orders"}
    v1 = schema_registry.register("orders-value", ORDER_V1)
    v2 = schema_registry.register("orders-value", ORDER_V2)
    first = [
        framed(v1, v)
        for v in avro_values(spark, ORDER_V1, [{"id": i, "qty": i, "note": f"n{i}"} for i in range(3)])
    ]
    bad = [b"\xff\xfe", framed(v1 + v2 + 100, b"\x02"), framed(v1, b"\x80"), b'{"id": 5}']
    decoding = decoding_sink(options, schema_registry, format=ValueFormat.AVRO)
    decoding(kafka_batch(spark, first + bad), 0)
    second_rows: list[dict[str, Any]] = [
        {"id": 10, "qty": 2**40, "note": None, "email": "a@x"},
        {"id": 11, "qty": 1, "note": "b", "email": None},
    ]
    second = [framed(v2, v) for v in avro_values(spark, ORDER_V2, second_rows)]
    decoding(kafka_batch(spark, second, first_offset=10), 1)

    table = catalog_from_options(options).load_table("db.avro_orders")
    assert str(table.metadata.schemas[0].find_field("qty").field_type) == "int"
    assert str(table.schema().find_field("qty").field_type) == "long"
    assert not table.schema().find_field("note").required
    rows = sorted(read(options, "db.avro_orders"), key=lambda r: r["id"])
    assert [(r["id"], r["qty"], r["note"], r["email"]) for r in rows] == [
        (0, 0, "n0", None),
        (1, 1, "n1", None),
        (2, 2, "n2", None),
        (10, 2**40, None, "a@x"),
        (11, 1, "b", None),
    ]
    errors = dead_letter_errors(options, "db.avro_orders__dlq")
    assert sorted(errors) == [3, 4, 5, 6]
    assert "2 bytes, less than the 5-byte header" in errors[3]
    assert f"unknown schema id {v1 + v2 + 100}" in errors[4]
    assert "not Avro of its schema" in errors[5]
    assert "magic byte 123" in errors[6]


def test_json_schema_values_and_an_unknown_schema_type(
    spark: Any, catalog_options: dict[str, str], schema_registry: SchemaRegistryServer
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
