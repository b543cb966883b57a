"""Values framed for a schema registry, without Spark: the framing, the registry client (on Apicurio
Registry, :mod:`tests.support.apicurio_registry`), the decoding pass."""

from __future__ import annotations

import datetime as dt
import json
import pickle
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest

from icesink.jobs.kafka.decode.framing import unframe
from icesink.jobs.kafka.decode.passes import DATA, REJECTED
from icesink.jobs.kafka.decode.registry import AVRO, JSON, SchemaRegistry, SchemaRegistryError
from icesink.jobs.kafka.decode.spec import DecodeSpec
from icesink.jobs.kafka.decode.task import decode_function
from tests.support.apicurio_registry import ApicurioRegistry
from tests.support.schema_registry import PasswordRegistry, framed
from tests.support.silent_server import SilentServer

T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
UNKNOWN_ID = 999_999  # more schemas than a test run registers


def test_unframe_keeps_positions_and_names_each_bad_value() -> None:
    values = pa.array(
        [framed(7, b'{"a": 1}'), None, b"\x00\x00", b"\x01" + b"\x00\x00\x00\x07{}", framed(8, b"{}")],
        pa.binary(),
    )
    payloads, reasons = unframe(values, {7})
    assert payloads.to_pylist() == [b'{"a": 1}', None, b"", b"", b""]
    assert set(reasons) == {2, 3, 4}
    assert "2 bytes" in reasons[2]
    assert "magic byte 1" in reasons[3]
    assert "unknown schema id 8" in reasons[4]


def test_the_client_reads_each_id_once_and_leaves_unknown_ids_out(schema_registry: ApicurioRegistry) -> None:
    avro_id = schema_registry.register("client-orders-value", {"type": "record", "name": "r", "fields": []})
    users = {"type": "object", "properties": {"id": {"type": "integer"}}}  # Apicurio wants properties
    json_id = schema_registry.register("client-users-value", users, JSON)
    client = SchemaRegistry(schema_registry.url, timeout_s=5)
    found = client.schemas([avro_id, json_id, UNKNOWN_ID, avro_id])
    assert {i: s.schema_type for i, s in found.items()} == {avro_id: AVRO, json_id: JSON}
    assert json.loads(found[json_id].text) == users
    asked = schema_registry.requests_by_id
    assert set(client.schemas([avro_id, json_id])) == {avro_id, json_id}
    assert schema_registry.requests_by_id == asked  # cached per id
    client.schemas([UNKNOWN_ID])
    assert (
        schema_registry.requests_by_id == asked + 1
    )  # an unknown id is asked again: it may be registered since


def test_an_unknown_id_is_a_404_with_confluents_error_code(schema_registry: ApicurioRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError

    with pytest.raises(ClientError) as caught:
        SchemaRegistryClient({"url": schema_registry.url}).get_schema(UNKNOWN_ID)
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40403)


def test_a_silent_registry_fails_within_the_timeout_with_a_coded_error_naming_it() -> None:
    with SilentServer() as silent:
        url = f"http://127.0.0.1:{silent.port}"
        with pytest.raises(
            SchemaRegistryError, match=r"ICESINK-SCHEMA-REGISTRY: .*schema id 3.*0\.5 s, 0 retries"
        ) as caught:
            SchemaRegistry(url, timeout_s=0.5, max_retries=0).schemas([3])
    assert url in str(caught.value)


def test_basic_auth_credentials_reach_the_registry_and_a_refusal_is_a_coded_error() -> None:
    server = PasswordRegistry(users={"job": "s3cret"})
    server.start()
    try:
        schema_id = server.add(json.dumps({"type": "object"}), JSON)
        client = SchemaRegistry(server.url, timeout_s=5, username="job", password="s3cret")
        shipped = pickle.loads(pickle.dumps(client))  # as Spark Connect ships a sink holding it
        assert shipped.schemas([schema_id])[schema_id].schema_type == JSON
        assert "s3cret" not in repr(client)
        with pytest.raises(SchemaRegistryError, match=r"ICESINK-SCHEMA-REGISTRY: .*HTTP 401.*schema id"):
            SchemaRegistry(server.url, timeout_s=5, username="job", password="wrong").schemas([schema_id])
    finally:
        server.stop()


def _kafka_batch(values: Sequence[bytes | None]) -> pa.RecordBatch:
    n = len(values)
    return pa.record_batch(
        {
            "key": pa.array([None] * n, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(["events"] * n),
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([T0] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def _passed(
    spec: DecodeSpec, values: Sequence[bytes | None]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    for out in decode_function(spec)(iter([_kafka_batch(values)])):
        for kind, payload in zip(
            out.column("kind").to_pylist(), out.column("payload").to_pylist(), strict=True
        ):
            table = pa.ipc.open_stream(payload).read_all().to_pylist()
            (rows if kind == DATA else rejected if kind == REJECTED else []).extend(table)
    return rows, rejected


def test_json_schema_values_decode_after_the_header_and_bad_ones_are_rejected_with_reasons() -> None:
    spec = DecodeSpec(framing="json-schema", schema_ids=frozenset({1, 2}))
    values = [
        framed(1, b'{"id": 1, "name": "a"}'),
        framed(2, b'{"id": 2, "name": "b", "email": "b@x"}'),
        b'{"id": 3}',  # plain JSON: no header
        framed(9, b'{"id": 4}'),
        framed(1, b"not json"),
    ]
    rows, rejected = _passed(spec, values)
    assert sorted((r["id"], r.get("email")) for r in rows) == [(1, None), (2, "b@x")]
    by_offset = {r["offset"]: r for r in rejected}
    assert sorted(by_offset) == [2, 3, 4]
    assert "magic byte 123" in str(by_offset[2]["message"])
    assert "unknown schema id 9" in str(by_offset[3]["message"])
    assert "not valid JSON" in str(by_offset[4]["message"])
    assert by_offset[3]["value"] == values[3]  # the raw bytes, header and all


def test_avro_values_the_driver_could_not_read_are_rejected_as_not_avro() -> None:
    spec = DecodeSpec(framing="avro", schema_ids=frozenset({1}))
    rows, rejected = _passed(spec, [framed(1, b'{"id": 1}'), framed(1, b"\x02\xff")])
    assert [r["id"] for r in rows] == [1]
    assert [r["offset"] for r in rejected] == [1]
    assert "not Avro of its schema" in str(rejected[0]["message"])


def test_the_spec_carries_the_framing_to_a_source() -> None:
    spec = DecodeSpec(framing="avro", schema_ids=frozenset({3, 1}))
    assert DecodeSpec.from_json(spec.to_json()) == spec
