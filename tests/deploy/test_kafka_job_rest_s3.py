"""The Kafka-to-Iceberg job through SeaweedFS's REST catalog, its tables on S3, its state on S3.

Apache Kafka (the run's broker, fixture ``apache_kafka``) holds JSON messages over two
partitions, a few of them malformed. The job (``icesink.jobs.kafka.job.main.run``, in this
process, on the tests' Spark session) reads them with ``availableNow`` in several
micro-batches, then once more after more messages arrive (resuming from its checkpoint).
The table and its dead-letter table are read back through the catalog: every message
exactly once in one of them, the columns, each snapshot's summary (operation, records,
the sink's batch ids), every data file referenced and nothing else under the tables'
locations, the state folder empty.
The credentials (S3 keys, the catalog's OAuth2 credential) reach the job through
environment references (``${env:NAME}``), not in its configuration, and no credential may
appear in what the job logged.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from tests.support.kafka_broker import KafkaBroker
from tests.support.s3_tables import check_table_folders, keys_under
from tests.support.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS

pytestmark = pytest.mark.deploy

PARTITIONS = 2
MALFORMED_EVERY = 97
FIRST, SECOND = 1_500, 500
MAX_OFFSETS = 1_000
METADATA = ["_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp"]


def value_of(i: int) -> bytes:
    if i % MALFORMED_EVERY == MALFORMED_EVERY - 1:
        return b'{"id": %d, "name": "cut' % i
    return json.dumps({"id": i, "name": f"user-{i}", "amount": i / 4}).encode()


def produce(broker: KafkaBroker, topic: str, start: int, count: int) -> dict[tuple[int, int], int]:
    """Messages ``start..start+count-1``, message ``i`` to partition ``i % 2``; their positions."""
    ids = range(start, start + count)
    delivered = broker.produce(topic, [(i % PARTITIONS, None, value_of(i)) for i in ids], linger_ms=5)
    return dict(zip(delivered, ids, strict=True))


SECRETS = {  # catalog property: the environment variable holding it
    "s3.access-key-id": "TEST_S3_ACCESS_KEY_ID",
    "s3.secret-access-key": "TEST_S3_SECRET_ACCESS_KEY",
    "credential": "TEST_ICEBERG_CREDENTIAL",
}


def job_config(seaweedfs: SeaweedFS, broker: KafkaBroker, topic: str, tmp_path: Path) -> dict[str, Any]:
    """The job on the REST catalog and S3; its credentials as references to the environment."""
    namespace = f"kafka_{uuid.uuid4().hex[:8]}"
    properties = seaweedfs.rest_catalog_properties()
    catalog = {f"catalog.{k}": f"${{env:{SECRETS[k]}}}" if k in SECRETS else v for k, v in properties.items()}
    return {
        "kafka": {
            "bootstrap-servers": broker.bootstrap_servers,
            "topics": [topic],
            "starting-offsets": "earliest",
            "max-offsets-per-trigger": MAX_OFFSETS,
            "source": "python",  # the session has Spark's connector too; this reads with icesink's
        },
        "sink": {
            "table": f"{namespace}.events",
            "catalog.name": "rest",
            **catalog,
            "state-location": f"s3://{WAREHOUSE_BUCKET}/icesink-state/{namespace}",
            "partition-by": "bucket(4, id)",
            "metrics.port": None,
        },
        "trigger": {"available-now": True},
        "checkpoint-location": str(tmp_path / "checkpoint"),
    }


def check_snapshots(table: Table, rows: int) -> None:
    summaries = [s.summary for s in table.snapshots()]
    assert summaries and all(x is not None and x.operation.value == "append" for x in summaries)
    properties = [x.additional_properties for x in summaries if x is not None]
    assert sum(int(p["added-records"]) for p in properties) == rows
    batch_ids = [b for p in properties for b in p["icesink.batch-ids"].split(",")]
    assert len(batch_ids) == len(set(batch_ids)), batch_ids  # each micro-batch committed once


def test_job_ingests_every_message_once_through_the_rest_catalog_onto_s3(
    spark: Any,
    seaweedfs: SeaweedFS,
    apache_kafka: KafkaBroker,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    properties = seaweedfs.rest_catalog_properties()
    for key, variable in SECRETS.items():
        monkeypatch.setenv(variable, properties[key])
    topic = f"rest-s3-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    apache_kafka.create_topic(topic, PARTITIONS)
    produced = produce(apache_kafka, topic, 0, FIRST)
    data = job_config(seaweedfs, apache_kafka, topic, tmp_path)
    secrets = (seaweedfs.secret_key, seaweedfs.access_key)
    assert not any(secret in json.dumps(data) for secret in secrets)
    caplog.set_level(logging.DEBUG)

    assert run(validate(data), spark) == 0
    produced |= produce(apache_kafka, topic, FIRST, SECOND)
    assert run(validate(data), spark) == 0  # resumes from the checkpoint

    sink = data["sink"]
    catalog = load_catalog("rest", **seaweedfs.rest_catalog_properties())
    table = catalog.load_table(sink["table"])
    dead_letters = catalog.load_table(f"{sink['table']}__dlq")
    rows = table.scan().to_arrow().to_pylist()
    letters = [json.loads(r["original_row"]) for r in dead_letters.scan().to_arrow().to_pylist()]
    in_table = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    in_letters = Counter((d["_kafka_partition"], d["_kafka_offset"]) for d in letters)
    malformed = {p for p, i in produced.items() if i % MALFORMED_EVERY == MALFORMED_EVERY - 1}
    assert len(rows) + len(letters) == FIRST + SECOND
    assert set(in_table.values()) == {1} and set(in_letters.values()) == {1}
    assert set(in_letters) == malformed
    assert set(in_table) == set(produced) - malformed
    for row in rows:
        i = produced[(row["_kafka_partition"], row["_kafka_offset"])]
        assert (row["id"], row["name"], row["amount"], row["_kafka_topic"]) == (i, f"user-{i}", i / 4, topic)
    assert [f.name for f in table.schema().fields] == ["id", "name", "amount", *METADATA]
    assert str(table.schema().find_field("id").field_type) in ("int", "long")

    check_snapshots(table, len(rows))
    check_snapshots(dead_letters, len(letters))
    assert len(table.snapshots()) >= (FIRST + SECOND) // MAX_OFFSETS  # several micro-batches
    for loaded in (table, dead_letters):
        assert loaded.location().startswith("s3://iceberg-tables/")
        check_table_folders(seaweedfs, loaded)
    assert not keys_under(seaweedfs, sink["state-location"] + "/")  # attempt records cleaned up

    logged = "\n".join(r.getMessage() + str(r.exc_info or "") for r in caplog.records)
    assert "rest-s3" in logged or sink["table"] in logged  # the job did log
    for secret in secrets:
        assert secret not in logged
