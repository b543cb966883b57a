"""The Kafka job's routing flags and YAML keys, mapped to the sink's ``route.*`` options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from icesink.config import SinkConfig
from icesink.destinations.table_options import TableOptions
from icesink.errors import ConfigError
from icesink.jobs.kafka.job.cli import load_config
from icesink.jobs.kafka.job.routing import is_routed, upserted_tables

BASE = [
    "--bootstrap-servers",
    "broker:9092",
    "--checkpoint-location",
    "/tmp/ck",
    "--sink-option",
    "catalog.type=sql",
    "--sink-option",
    "catalog.uri=sqlite:////tmp/c.db",
]


def test_flags_route_topics_to_tables_without_a_table() -> None:
    config = load_config(
        [*BASE, "--topic-pattern", r"shop\..*", "--route-by", "topic", "--table-template", "raw.{topic}"]
    )
    options = config.sink_options()
    assert options["route.by"] == "topic" and options["route.table-template"] == "raw.{topic}"
    assert "table" not in options
    assert config.kafka.source_options("python")["subscribePattern"] == r"shop\..*"
    assert is_routed(options)


def test_flags_route_by_a_field_through_an_explicit_map() -> None:
    tables = {"click": "ev.clicks", "view": "ev.views"}
    route = ["--route-by", "field", "--route-field", "type", "--route-tables", json.dumps(tables)]
    config = load_config([*BASE, "--topics", "bus", *route])
    options = config.sink_options()
    assert (options["route.by"], options["route.field"]) == ("field", "type")
    assert json.loads(str(options["route.tables"])) == tables


def test_yaml_keys_take_mappings_for_the_json_options(tmp_path: Path) -> None:
    data: dict[str, Any] = {
        "kafka": {"bootstrap-servers": "broker:9092", "topics": ["bus"]},
        "sink": {
            "catalog.type": "sql",
            "route.by": "field",
            "route.field": "type",
            "route.tables": {"click": "ev.clicks"},
            "route.table-options": {"ev.*": {"partition-by": "bucket(4, id)"}},
        },
        "checkpoint-location": "/tmp/ck",
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    options = load_config(["--config", str(path)]).sink_options()
    assert json.loads(str(options["route.tables"])) == {"click": "ev.clicks"}
    assert json.loads(str(options["route.table-options"])) == {"ev.*": {"partition-by": "bucket(4, id)"}}


def test_route_by_topic_needs_the_metadata_columns() -> None:
    flags = [*BASE, "--topics", "a,b", "--route-by", "topic", "--table-template", "raw.{topic}"]
    with pytest.raises(ConfigError, match=r"value\.metadata-columns") as info:
        load_config([*flags, "--no-metadata-columns"])
    assert "_kafka_topic" in str(info.value)


def test_routing_without_a_template_or_map_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"route\.table-template"):
        load_config([*BASE, "--topics", "a", "--route-by", "topic"])


def test_no_routing_still_needs_a_table() -> None:
    with pytest.raises(ConfigError, match="'table'"):
        load_config([*BASE, "--topics", "a", "--route-by", "none"])


def test_upsert_keys_of_a_routed_job_apply_to_every_routed_table() -> None:
    options = {
        "route.by": "topic",
        "route.table-template": "cdc.{topic}",
        "route.table-options": json.dumps({"cdc.audit*": {"write.mode": "append"}, "cdc.big*": {}}),
        "write.mode": "upsert",
        "upsert.key-columns": "id",
    }
    moved = upserted_tables(options)
    assert "write.mode" not in moved and "upsert.key-columns" not in moved
    per_table = json.loads(str(moved["route.table-options"]))
    assert list(per_table) == ["cdc.audit*", "cdc.big*", "*"]  # first match wins: the catch-all last
    assert per_table["cdc.audit*"] == {"write.mode": "append"}  # a pattern's own mode stays
    assert per_table["cdc.big*"] == per_table["*"] == {"write.mode": "upsert", "upsert.key-columns": "id"}
    unrouted = {"table": "db.t", "write.mode": "upsert", "upsert.key-columns": "id"}
    assert upserted_tables(unrouted) == unrouted


def test_bad_table_options_json_names_the_key() -> None:
    options = {"route.by": "topic", "route.table-options": "{nope", "write.mode": "upsert"}
    with pytest.raises(ConfigError, match=r"sink\.route\.table-options"):
        upserted_tables(options)


def test_debezium_upserts_of_routed_tables_upsert_each_table_by_the_key() -> None:
    flags = [*BASE, "--topic-pattern", "cdc\\..*", "--route-by", "topic", "--table-template", "cdc.{topic}"]
    config = load_config([*flags, "--value-format", "debezium-json", "--upsert-key", "id"])
    sink = SinkConfig.from_options(config.sink_options())
    table = TableOptions(sink).config_for("cdc.cdc_orders")
    assert table.upsert.enabled and table.upsert.key_columns == ("id",)
    assert table.upsert.order_column == "_source_ts"  # Debezium's source time orders a key's changes
