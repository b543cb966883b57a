"""The Kafka-to-Iceberg job against a real Kafka-protocol broker (Tansu): every message exactly once.

The topic: 200,000 JSON messages over 4 partitions. Halfway, the messages gain a field
(``email``) and their ``counter`` outgrows 32 bits (int to long); 0.5 % of the values
are malformed (broken JSON, not JSON, not UTF-8, not an object, tombstones). A
message's (partition, offset) tells what it holds, so every row is checked, not counted.

The claim each test checks: table rows + dead letters = messages produced, each
(partition, offset) exactly once, the malformed ones exactly in the dead-letter table,
and the table's schema evolved (``counter`` from int to long, ``email`` added).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import random
import signal
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from icesink import ConfigError
from sink import failpoints, metrics_server
from sink import sink as sink_module
from streaming_jobs.kafka.job.main import run
from streaming_jobs.kafka.job.validate import validate
from streaming_jobs.kafka.source.kafka_select import kafka_format
from tests.support.kafka_job import JOB_TIMEOUT_S, start_job, wait_for_batches
from tests.support.tables import catalog_from_options, check_data_files
from tests.support.tansu import TansuBroker

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MESSAGES = 200_000
PARTITIONS = 4
MALFORMED_EVERY = 200  # 0.5 %
COUNTER_BASE_AFTER = 3_000_000_000  # beyond int
Position = tuple[int, int]


@dataclass(frozen=True)
class Produced:
    topic: str
    positions: frozenset[Position]
    malformed: frozenset[Position]


def value_of(i: int) -> bytes | None:
    """Message ``i``: well-formed unless ``i % MALFORMED_EVERY == 199``; new shape from the second half."""
    if i % MALFORMED_EVERY == MALFORMED_EVERY - 1:
        kind = (i // MALFORMED_EVERY) % 5
        return [b'{"id": %d, "name": "cut' % i, b"not json", None, b'{"id": "\xff\xfe"}', b"[1, 2, 3]"][kind]
    event: dict[str, Any] = {"id": i, "name": f"user-{i}", "amount": i / 8, "ts": "2024-05-01T12:00:00Z"}
    if i < MESSAGES // 2:
        event["counter"] = i
    else:
        event["counter"] = COUNTER_BASE_AFTER + i
        event["email"] = f"user-{i}@example.com"
    return json.dumps(event).encode()


def position_of(i: int) -> Position:
    """Where message ``i`` lands: produced in order, partition ``i % 4``."""
    return i % PARTITIONS, i // PARTITIONS


@pytest.fixture(scope="module")
def events(kafka_broker: TansuBroker) -> Produced:
    topic = f"events-{os.getpid()}"
    kafka_broker.create_topic(topic, PARTITIONS)
    for first in range(0, MESSAGES, 50_000):
        batch = range(first, first + 50_000)
        delivered = kafka_broker.produce(
            topic, [(i % PARTITIONS, None, value_of(i)) for i in batch], linger_ms=20
        )
        assert delivered == [position_of(i) for i in batch]
    malformed = {position_of(i) for i in range(MESSAGES) if i % MALFORMED_EVERY == MALFORMED_EVERY - 1}
    return Produced(topic, frozenset(position_of(i) for i in range(MESSAGES)), frozenset(malformed))


def job_config(
    broker: TansuBroker, topic: str, tmp_path: Path, table: str, max_offsets: int, **extra: Any
) -> dict[str, Any]:
    return {
        "kafka": {
            "bootstrap-servers": broker.bootstrap_servers,
            "topics": [topic],
            "starting-offsets": "earliest",
            "max-offsets-per-trigger": max_offsets,
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
        # As deployed: a query that fails to start on a loaded machine (Spark gives a new
        # Python worker 10 s to connect back) starts again from its checkpoint.
        "max-restarts": 2,
        "spark": {
            "master": "local[2]",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"},
        },
        **extra,
    }


def check_exactly_once(options: dict[str, str], table_name: str, produced: Produced) -> list[dict[str, Any]]:
    """Every produced message once in the table or the dead-letter table; returns the table's rows."""
    catalog = catalog_from_options(options)
    rows = catalog.load_table(table_name).scan().to_arrow().to_pylist()
    dead = [
        json.loads(r["original_row"])
        for r in catalog.load_table(f"{table_name}__dlq").scan().to_arrow().to_pylist()
    ]
    in_table = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    in_dlq = Counter((d["_kafka_partition"], d["_kafka_offset"]) for d in dead)
    assert len(rows) + len(dead) == len(produced.positions)
    assert max(in_table.values()) == 1, "a message is in the table twice"
    assert not in_dlq or max(in_dlq.values()) == 1, "a message is in the dead-letter table twice"
    assert set(in_dlq) == produced.malformed
    assert set(in_table) | set(in_dlq) == produced.positions
    for row in rows:  # each row holds what its message held
        i = row["_kafka_offset"] * PARTITIONS + row["_kafka_partition"]
        assert row["id"] == i and row["name"] == f"user-{i}"
        assert row["counter"] == (i if i < MESSAGES // 2 else COUNTER_BASE_AFTER + i)
        assert row["email"] == (None if i < MESSAGES // 2 else f"user-{i}@example.com")
    for letter in dead:
        i = letter["_kafka_offset"] * PARTITIONS + letter["_kafka_partition"]
        raw = value_of(i)
        assert letter["_kafka_value"] == (None if raw is None else base64.b64encode(raw).decode())
    return rows


def check_schema_evolved(options: dict[str, str], table_name: str) -> None:
    table = catalog_from_options(options).load_table(table_name)
    first, current = table.metadata.schemas[0], table.schema()
    assert str(first.find_field("counter").field_type) == "int"
    assert "email" not in {f.name for f in first.fields}
    assert str(current.find_field("counter").field_type) == "long"
    assert str(current.find_field("email").field_type) == "string"
    assert str(current.find_field("ts").field_type) == "string"  # JSON strings stay strings


def test_job_ingests_every_message_once_and_evolves_the_schema(
    spark: Any,
    kafka_broker: TansuBroker,
    events: Produced,
    tmp_path: Path,
    metrics_exports: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = "e2e.events_once"
    config = validate(job_config(kafka_broker, events.topic, tmp_path, table, max_offsets=50_000))
    served: dict[str, float] = defaultdict(float)
    real_unexport = sink_module.unexport

    def unexport(metrics: Any) -> None:  # the job closes its sinks at the end: read what they served then
        if served:
            return real_unexport(metrics)  # the first close saw every exported sink's metrics
        for family in metrics_server.served_registry().collect():
            for sample in family.samples:
                if sample.labels.get("table") == table:
                    served[sample.name] += sample.value  # summed over the other labels (sink id, ...)
        real_unexport(metrics)

    monkeypatch.setattr(sink_module, "unexport", unexport)
    started = time.monotonic()
    assert run(config, spark) == 0
    print(f"\n{MESSAGES:,} messages in {time.monotonic() - started:.0f} s")  # for the record, not asserted
    options = {k: str(v) for k, v in config.sink_options().items()}
    check_exactly_once(options, table, events)
    check_schema_evolved(options, table)
    assert served["icesink_rows_written_total"] == MESSAGES - len(events.malformed)
    assert served["icesink_dead_letter_rows_total"] == len(events.malformed)


# The routed job's SIGKILL test (tests/e2e/test_kafka_routing.py) kills this job's process
# in make test; this one, twice at seeded random moments, is in make test-faults.
@pytest.mark.faults_full
def test_sigkilled_twice_then_restarted_ends_with_the_same_result(
    kafka_broker: TansuBroker, events: Produced, tmp_path: Path
) -> None:
    seed = int(os.environ.get("ICESINK_KILL_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    table = "e2e.events_killed"
    data = job_config(kafka_broker, events.topic, tmp_path, table, max_offsets=25_000)  # 8 micro-batches
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(data))
    offsets_log = tmp_path / "checkpoint" / "offsets"

    kill_after_batches = sorted(rng.sample(range(1, 7), 2))
    for attempt, batches in enumerate(kill_after_batches):
        delay_s = rng.uniform(0.0, 4.0)
        job = start_job(config_file, tmp_path / f"job-{attempt}.log")
        wait_for_batches(job, offsets_log, batches + 1, tmp_path / f"job-{attempt}.log")
        time.sleep(delay_s)  # a random moment inside batch ``batches`` (or the next)
        assert job.poll() is None, f"the job ended before it was killed (seed {seed})"
        os.killpg(job.pid, signal.SIGKILL)  # the driver, the JVM and the Python workers at once
        assert job.wait(60) == -signal.SIGKILL

    job = start_job(config_file, tmp_path / "job-final.log")
    code = job.wait(JOB_TIMEOUT_S)
    assert code == 0, f"seed {seed}: " + (tmp_path / "job-final.log").read_text()[-4000:]

    options = {k: str(v) for k, v in validate(data).sink_options().items()}
    check_exactly_once(options, table, events)
    check_schema_evolved(options, table)
    for name in (table, f"{table}__dlq"):
        loaded = catalog_from_options(options).load_table(name)
        referenced = {task.file.file_path for task in loaded.scan().plan_files()}
        data_dir = Path(loaded.location().removeprefix("file://")) / "data"
        on_disk = {f"file://{p}" for p in data_dir.rglob("*.parquet")}
        assert on_disk == referenced, f"seed {seed}: files of crashed attempts left in {name}"


def test_a_partition_added_mid_stream_is_ingested(
    spark: Any, kafka_broker: TansuBroker, tmp_path: Path, metrics_exports: None
) -> None:
    topic = f"growing-{os.getpid()}"
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(
        topic, [(i % 2, None, json.dumps({"n": i}).encode()) for i in range(2_000)], linger_ms=20
    )
    table = "e2e.growing"
    data = job_config(kafka_broker, topic, tmp_path, table, max_offsets=800)
    config = validate(data)
    assert run(config, spark) == 0  # the query's checkpoint knows partitions 0 and 1

    kafka_broker.add_partitions(topic, 3)  # Tansu: the topic is recreated with the same records
    kafka_broker.produce(
        topic, [(i % 3, None, json.dumps({"n": i}).encode()) for i in range(2_000, 3_500)], linger_ms=20
    )
    assert run(config, spark) == 0  # resumes from the checkpoint and finds partition 2

    options = {k: str(v) for k, v in config.sink_options().items()}
    rows = catalog_from_options(options).load_table(table).scan().to_arrow().to_pylist()
    assert sorted(r["n"] for r in rows) == list(range(3_500))
    new_partition = sorted(r["_kafka_offset"] for r in rows if r["_kafka_partition"] == 2)
    assert new_partition == list(range(500))


def test_a_failing_batch_ends_the_job_with_code_1_after_its_restarts(
    spark: Any,
    kafka_broker: TansuBroker,
    tmp_path: Path,
    metrics_exports: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = f"strict-{os.getpid()}"
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [(0, None, b'{"n": 1}'), (0, None, b"oops")])
    data = job_config(kafka_broker, topic, tmp_path, "e2e.strict", max_offsets=100, **{"max-restarts": 1})
    data["sink"]["on-bad-record"] = "fail"
    with caplog.at_level(logging.WARNING, logger="streaming_jobs.kafka.job"):
        assert run(validate(data), spark) == 1
    assert "restart 1 of 1" in caplog.text and "restart 2" not in caplog.text
    assert not catalog_from_options({k: str(v) for k, v in data["sink"].items()}).table_exists("e2e.strict")


def test_sigterm_stops_a_running_job(
    spark: Any, kafka_broker: TansuBroker, tmp_path: Path, metrics_exports: None
) -> None:
    topic = f"endless-{os.getpid()}"
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [(0, None, json.dumps({"n": i}).encode()) for i in range(10)])
    data = job_config(kafka_broker, topic, tmp_path, "e2e.endless", max_offsets=100)
    data["trigger"] = {"interval": "1 second"}  # runs until stopped
    timer = threading.Timer(20.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        assert run(validate(data), spark) == 0
    finally:
        timer.cancel()
    rows = catalog_from_options({k: str(v) for k, v in data["sink"].items()}).load_table("e2e.endless")
    assert rows.scan().to_arrow().num_rows == 10


def test_the_jvm_source_is_chosen_only_when_on_the_classpath(spark: Any) -> None:
    assert kafka_format(spark, "auto") == "icesink-kafka"  # no connector in this environment
    with pytest.raises(ConfigError, match="spark-sql-kafka-0-10"):
        kafka_format(spark, "jvm")


def test_a_failed_query_starts_again_from_its_checkpoint_and_each_message_lands_once(
    spark: Any,
    kafka_broker: TansuBroker,
    tmp_path: Path,
    metrics_exports: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = f"restarted-{os.getpid()}"
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [(i % 2, None, json.dumps({"n": i}).encode()) for i in range(3_000)])
    restarts = {"max-restarts": 2}
    data = job_config(kafka_broker, topic, tmp_path, "e2e.restarted", max_offsets=1_000, **restarts)
    # The first batch's files are written, then foreachBatch fails before they are staged.
    failpoints.arm("stage")
    try:
        with caplog.at_level(logging.WARNING, logger="streaming_jobs.kafka.job"):
            assert run(validate(data), spark) == 0
    finally:
        failpoints.disarm_all()
    assert "restart 1 of 2" in caplog.text and "restart 2" not in caplog.text
    options = {k: str(v) for k, v in data["sink"].items()}
    table = catalog_from_options(options).load_table("e2e.restarted")
    assert sorted(table.scan().to_arrow().column("n").to_pylist()) == list(range(3_000))
    assert check_data_files(table) > 0  # every referenced file there, its statistics its content's
