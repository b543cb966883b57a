"""The Kafka job with ``--upsert-key`` on Debezium topics of Apache Kafka: each key's last change.

The single-table job runs on both of the job's sources (the Python source's in ``make
test-kafka``); the job routing two topics by topic, on the Python source.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.manifest import DataFileContent

from icesink.jobs.kafka.job.cli import load_config
from icesink.jobs.kafka.job.main import run
from tests.support.duckdb_reader import duckdb_read
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import SOURCES_PYTHON_IN_FULL, job_config, require_source
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

# (op, before, after): create 1 and 2, update 1, delete 2, create 3, create 2 again.
EVENTS = [
    ("c", None, {"id": 1, "name": "a"}),
    ("c", None, {"id": 2, "name": "b"}),
    ("u", {"id": 1, "name": "a"}, {"id": 1, "name": "a2"}),
    ("d", {"id": 2, "name": "b"}, None),
    ("c", None, {"id": 3, "name": "c"}),
    ("c", None, {"id": 2, "name": "b again"}),
]


def debezium(n: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> bytes:
    event = {"before": before, "after": after, "op": op, "source": {"ts_ms": 1_714_564_800_000 + n}}
    return json.dumps(event).encode()


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_a_debezium_topic_becomes_an_upserted_table(
    spark: Any, apache_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    topic_name = f"debezium-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic_name, 1)
    records = [(0, None, debezium(n, *event)) for n, event in enumerate(EVENTS)]
    apache_kafka.produce(topic_name, records)
    table_name = "e2e.customers"
    config_file = tmp_path / "job.yaml"
    # Two events per micro-batch: the update and the delete land in later batches than their create.
    config_file.write_text(
        yaml.safe_dump(
            job_config(apache_kafka.bootstrap_servers, topic_name, tmp_path, table_name, 2, source)
        )
    )
    config = load_config(
        [
            "--config",
            str(config_file),
            "--value-format",
            "debezium-json",
            "--value-schema",
            "id BIGINT, name STRING",
            "--no-metadata-columns",
            "--upsert-key",
            "id",
        ]
    )
    assert run(config, spark) == 0

    options = {k: str(v) for k, v in config.sink_options().items()}
    table = catalog_from_options(options).load_table(table_name)
    expected = {1: "a2", 2: "b again", 3: "c"}
    assert {r["id"]: r["name"] for r in table.scan().to_arrow().to_pylist()} == expected
    assert {r["id"]: r["name"] for r in duckdb_read(table.metadata_location).to_pylist()} == expected
    assert table.schema().column_names == ["id", "name"]  # _op and _source_ts describe changes only
    assert len(table.snapshots()) == 3
    snapshot = table.current_snapshot()
    assert snapshot is not None
    contents = {
        e.data_file.content for m in snapshot.manifests(table.io) for e in m.fetch_manifest_entry(table.io)
    }
    assert DataFileContent.POSITION_DELETES in contents and DataFileContent.EQUALITY_DELETES not in contents


def test_debezium_topics_routed_by_topic_each_become_an_upserted_table(
    spark: Any, apache_kafka: KafkaBroker, tmp_path: Path, metrics_exports: None
) -> None:
    topics = [f"customers-{os.getpid()}", f"vendors-{os.getpid()}"]
    for topic in topics:  # the same changes on both topics, the second shifted by 10
        apache_kafka.create_topic(topic, 1)
        shift = 10 * topics.index(topic)
        records = [
            (0, None, debezium(n, op, _shifted(before, shift), _shifted(after, shift)))
            for n, (op, before, after) in enumerate(EVENTS)
        ]
        apache_kafka.produce(topic, records)
    data = job_config(
        apache_kafka.bootstrap_servers, topics[0], tmp_path, "", 4, "python"
    )  # a few changes per micro-batch
    data["kafka"]["topics"] = topics
    data["sink"] = {k: v for k, v in data["sink"].items() if k != "table"}
    data["sink"].update({"route.by": "topic", "route.table-template": "e2e.{topic}"})
    data["sink"]["dead-letter.table"] = "e2e.routed__dlq"
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(data))
    flags = [
        "--value-format",
        "debezium-json",
        "--value-schema",
        "id BIGINT, name STRING",
        "--upsert-key",
        "id",
    ]
    config = load_config(["--config", str(config_file), *flags])
    assert run(config, spark) == 0

    catalog = catalog_from_options({k: str(v) for k, v in config.sink_options().items()})
    for shift, topic in enumerate(topics):
        table = catalog.load_table(f"e2e.{topic.replace('-', '_')}")
        expected = {1 + 10 * shift: "a2", 2 + 10 * shift: "b again", 3 + 10 * shift: "c"}
        assert {r["id"]: r["name"] for r in table.scan().to_arrow().to_pylist()} == expected
        assert {r["id"]: r["name"] for r in duckdb_read(table.metadata_location).to_pylist()} == expected
        assert "_op" not in table.schema().column_names and "_source_ts" not in table.schema().column_names
        assert table.schema().identifier_field_names() == {"id"}
        assert len(table.snapshots()) >= 3  # a row delta per micro-batch with its changes
        assert {s.summary.operation.value for s in table.snapshots() if s.summary} == {"overwrite"}


def _shifted(row: dict[str, Any] | None, by: int) -> dict[str, Any] | None:
    return None if row is None else {**row, "id": int(row["id"]) + by}
