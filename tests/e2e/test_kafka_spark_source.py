"""The Kafka-to-Iceberg job on Spark's own Kafka source (``kafka.source: jvm``) and Apache Kafka.

The broker is Apache Kafka (the ``apache_kafka`` fixture: KRaft, one node); the job reads
with ``format("kafka")``, the jars ``make env`` fetched handed to its session with
``spark.jars``. The topic: 4,000 JSON messages over 4 partitions, one in 50 malformed
(broken JSON, not JSON, not UTF-8, not an object, tombstones); a message's (partition,
offset) tells what it holds. The job runs as a process of its own (its session needs the
jars at start), reports its Kafka lag from the source's progress, is SIGKILLed inside a
micro-batch and started again from its checkpoint: table rows + dead letters = messages,
each (partition, offset) once. A job whose brokers cannot be reached fails with
``ICESINK-KAFKA-SOURCE``, naming them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from streaming_jobs.jvm_jars import spark_kafka_jars
from streaming_jobs.kafka.job.validate import validate
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import JOB_TIMEOUT_S, start_job, wait_for_batches
from tests.support.processes import free_port, http_get, wait_until
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

MESSAGES = 4_000
PARTITIONS = 4
MALFORMED_EVERY = 50
PER_BATCH = 1_000  # 4 micro-batches
LAG_METRIC = "icesink_source_offsets_behind_latest"
LAG_TIMEOUT_S = 120.0  # bounds a wait: Spark reports a batch's progress asynchronously
Position = tuple[int, int]


@dataclass(frozen=True)
class Produced:
    topic: str
    positions: frozenset[Position]
    malformed: frozenset[Position]


def value_of(i: int) -> bytes | None:
    """Message ``i``: a JSON object, but malformed when ``i % MALFORMED_EVERY == 49``."""
    if i % MALFORMED_EVERY == MALFORMED_EVERY - 1:
        kind = (i // MALFORMED_EVERY) % 5
        return [b'{"id": %d, "name": "cut' % i, b"not json", None, b'{"id": "\xff\xfe"}', b"[1, 2]"][kind]
    return json.dumps({"id": i, "name": f"user-{i}", "amount": i / 8}).encode()


def position_of(i: int) -> Position:
    return i % PARTITIONS, i // PARTITIONS


@pytest.fixture(scope="module")
def jars() -> None:
    if not spark_kafka_jars():
        message = "Spark's Kafka source was not fetched; make env fetches it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def events(apache_kafka: KafkaBroker) -> Produced:
    topic = f"spark-source-{os.getpid()}"
    apache_kafka.create_topic(topic, PARTITIONS)
    delivered = apache_kafka.produce(topic, [(i % PARTITIONS, None, value_of(i)) for i in range(MESSAGES)])
    assert delivered == [position_of(i) for i in range(MESSAGES)]
    malformed = {position_of(i) for i in range(MESSAGES) if i % MALFORMED_EVERY == MALFORMED_EVERY - 1}
    return Produced(topic, frozenset(map(position_of, range(MESSAGES))), frozenset(malformed))


def job_file(tmp_path: Path, bootstrap_servers: str, topic: str, table: str, **kafka: Any) -> Path:
    data = {
        "kafka": {
            "bootstrap-servers": bootstrap_servers,
            "topics": [topic],
            "starting-offsets": "earliest",
            "max-offsets-per-trigger": PER_BATCH,
            "source": "jvm",
            **kafka,
        },
        "sink": {
            "table": table,
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
            "metrics.port": 0,
        },
        "trigger": {"available-now": True},
        "checkpoint-location": str(tmp_path / "checkpoint"),
        "spark": {
            "master": "local[2]",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        },
    }
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def offsets_behind_latest(log: Path) -> int:
    """``icesink_source_offsets_behind_latest`` as the job's metrics endpoint serves it; 0 while absent."""
    served = re.search(r"metrics served at (http://127\.0\.0\.1:\d+/metrics)", log.read_text())
    if served is None:
        return 0
    lines = http_get(served[1]).splitlines()
    values = [float(line.split()[-1]) for line in lines if line.startswith(LAG_METRIC + "{")]
    return int(sum(values))


def test_sigkilled_job_on_sparks_source_ends_with_every_message_once(
    jars: None, apache_kafka: KafkaBroker, events: Produced, tmp_path: Path
) -> None:
    table = "e2e.spark_source"
    config_file = job_file(tmp_path, apache_kafka.bootstrap_servers, events.topic, table)
    first_log = tmp_path / "job-killed.log"
    job = start_job(config_file, first_log)
    wait_for_batches(job, tmp_path / "checkpoint" / "offsets", 2, first_log)  # batch 1 started
    # The lag from the source's progress (latestOffset against endOffset) after some whole batches
    lag = wait_until(lambda: offsets_behind_latest(first_log), LAG_TIMEOUT_S, "the Kafka lag of batch 0")
    assert lag in range(MESSAGES - PER_BATCH, 0, -PER_BATCH), lag
    os.killpg(job.pid, signal.SIGKILL)  # the driver, the JVM and the Python workers at once
    assert job.wait(60) == -signal.SIGKILL

    final_log = tmp_path / "job-final.log"
    job = start_job(config_file, final_log)
    assert job.wait(JOB_TIMEOUT_S) == 0, final_log.read_text()[-4000:]
    assert "reading Kafka with Spark's connector" in final_log.read_text()

    options = {k: str(v) for k, v in validate(yaml.safe_load(config_file.read_text())).sink_options().items()}
    catalog = catalog_from_options(options)
    rows = catalog.load_table(table).scan().to_arrow().to_pylist()
    dead = [
        json.loads(r["original_row"])
        for r in catalog.load_table(f"{table}__dlq").scan().to_arrow().to_pylist()
    ]
    in_table = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    in_dlq = Counter((d["_kafka_partition"], d["_kafka_offset"]) for d in dead)
    assert len(rows) + len(dead) == MESSAGES
    assert max(in_table.values()) == 1 and max(in_dlq.values()) == 1, "a message was written twice"
    assert set(in_dlq) == events.malformed
    assert set(in_table) | set(in_dlq) == events.positions
    for row in rows:
        i = row["_kafka_offset"] * PARTITIONS + row["_kafka_partition"]
        assert (row["id"], row["name"], row["amount"]) == (i, f"user-{i}", i / 8)
    for letter in dead:
        raw = value_of(letter["_kafka_offset"] * PARTITIONS + letter["_kafka_partition"])
        assert letter["_kafka_value"] == (None if raw is None else base64.b64encode(raw).decode())


def test_unreachable_brokers_fail_the_job_with_the_sources_coded_error(jars: None, tmp_path: Path) -> None:
    nobody = f"127.0.0.1:{free_port()}"
    # 2 s per offset request instead of the job's 15 s: the same path, a shorter wait
    config_file = job_file(
        tmp_path, nobody, "absent", "e2e.unreachable", options={"default.api.timeout.ms": 2000}
    )
    log = tmp_path / "job.log"
    job = start_job(config_file, log)
    assert job.wait(JOB_TIMEOUT_S) == 1
    text = log.read_text()
    assert f"ICESINK-KAFKA-SOURCE: Spark's Kafka source failed on the brokers at {nobody}" in text, text[
        -4000:
    ]
    assert "org.apache.kafka.common.errors.TimeoutException" in text
