"""The Kafka job on Apache Kafka with values framed for a schema registry: Avro whose schema
changes mid-stream, and Debezium Avro upserts, produced by confluent-kafka's ``AvroSerializer``;
garbage and unknown schema ids become dead letters.

The Python source in ``make test``, Spark's connector in ``make test-kafka`` (``kafka_full``);
the Debezium upserts in ``make test-kafka`` only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from icesink.jobs.kafka.decode.framing import schema_id
from icesink.jobs.kafka.job.cli import load_config
from icesink.jobs.kafka.job.main import run
from tests.support.apicurio_registry import ApicurioRegistry
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import SOURCES_JVM_IN_FULL, job_config, require_source
from tests.support.schema_registry import avro_framed, framed
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": "string"},
    ],
}
ORDER_V2 = {  # a new version: qty widened to long, note made optional, a field added
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "qty", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "coupon", "type": ["null", "string"], "default": None},
    ],
}


@pytest.mark.parametrize("source", SOURCES_JVM_IN_FULL)
def test_avro_values_through_a_schema_change_and_bad_values_to_dead_letters(
    spark: Any,
    apache_kafka: KafkaBroker,
    schema_registry: ApicurioRegistry,
    source: str,
    tmp_path: Path,
    metrics_exports: None,
) -> None:
    require_source(source)
    topic = f"avro-orders-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic, 1)
    first: list[dict[str, Any]] = [{"id": i, "qty": i, "note": f"n{i}"} for i in range(4)]
    second: list[dict[str, Any]] = [
        {"id": 4, "qty": 2**40, "note": None, "coupon": "X"},
        {"id": 5, "qty": 5, "note": "n5", "coupon": None},
    ]
    values = avro_framed(schema_registry.url, topic, ORDER_V1, first)
    v1 = schema_id(values[0])
    assert v1 is not None
    # Not framed, an id the registry does not hold, bytes that are not Avro of their schema.
    values += [b"garbage", framed(999_999, b"\x02\x04"), framed(v1, b"\x80")]
    values += avro_framed(schema_registry.url, topic, ORDER_V2, second)
    apache_kafka.produce(topic, [(0, None, v) for v in values])
    table_name = "e2e.avro_orders"
    # Two micro-batches: the first (version 1 and the garbage) creates the table, the second evolves it.
    config = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, table_name, 5, source)
    config["value"] = {"format": "avro", "schema-registry": {"url": schema_registry.url}}
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(config))
    job = load_config(["--config", str(config_file)])
    assert run(job, spark) == 0

    options = {k: str(v) for k, v in job.sink_options().items()}
    catalog = catalog_from_options(options)
    table = catalog.load_table(table_name)
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["qty"], r["note"], r["coupon"], r["_kafka_offset"]) for r in rows] == [
        (0, 0, "n0", None, 0),
        (1, 1, "n1", None, 1),
        (2, 2, "n2", None, 2),
        (3, 3, "n3", None, 3),
        (4, 2**40, None, "X", 7),
        (5, 5, "n5", None, 8),
    ]
    assert str(table.metadata.schemas[0].find_field("qty").field_type) == "int"
    assert str(table.schema().find_field("qty").field_type) == "long"
    assert not table.schema().find_field("note").required
    dead = [
        json.loads(d["original_row"])
        for d in catalog.load_table(f"{table_name}__dlq").scan().to_arrow().to_pylist()
    ]
    errors = {d["_kafka_offset"]: d["error"] for d in dead}
    assert sorted(errors) == [4, 5, 6]
    assert "magic byte 103" in errors[4]
    assert "unknown schema id 999999" in errors[5]
    assert "not Avro of its schema" in errors[6]  # not a row of nulls


VALUE = {
    "type": "record",
    "name": "Value",
    "fields": [{"name": "id", "type": "int"}, {"name": "name", "type": "string"}],
}
ENVELOPE = {  # as Debezium's Avro converter registers it
    "type": "record",
    "name": "Envelope",
    "namespace": "dbserver1.inventory.customers",
    "fields": [
        {"name": "before", "type": ["null", VALUE], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {"type": "record", "name": "Source", "fields": [{"name": "ts_ms", "type": "long"}]},
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
}


@pytest.mark.kafka_full
def test_debezium_avro_changes_upsert_the_table(
    spark: Any,
    apache_kafka: KafkaBroker,
    schema_registry: ApicurioRegistry,
    tmp_path: Path,
    metrics_exports: None,
) -> None:
    topic = f"avro-customers-{os.getpid()}"
    apache_kafka.create_topic(topic, 1)
    ms = 1_714_564_800_000
    changes: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = [
        ("c", None, {"id": 1, "name": "a"}),
        ("c", None, {"id": 2, "name": "b"}),
        ("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"}),
        ("d", {"id": 2, "name": "b"}, None),
        ("c", None, {"id": 3, "name": "c"}),
    ]
    events = [
        {"before": b, "after": a, "source": {"ts_ms": ms + n}, "op": op, "ts_ms": ms + n}
        for n, (op, b, a) in enumerate(changes)
    ]
    values: list[bytes | None] = list(avro_framed(schema_registry.url, topic, ENVELOPE, events))
    values.insert(4, None)  # the delete's tombstone
    apache_kafka.produce(topic, [(0, None, v) for v in values])
    table_name = "e2e.avro_customers"
    config_file = tmp_path / "job.yaml"
    config = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, table_name, 2, "python")
    config_file.write_text(yaml.safe_dump(config))
    flags = ["--value-format", "debezium-avro", "--schema-registry-url", schema_registry.url]
    job = load_config(["--config", str(config_file), *flags, "--upsert-key", "id"])
    assert run(job, spark) == 0

    options = {k: str(v) for k, v in job.sink_options().items()}
    table = catalog_from_options(options).load_table(table_name)
    assert {r["id"]: r["name"] for r in table.scan().to_arrow().to_pylist()} == {1: "a2", 3: "c"}
