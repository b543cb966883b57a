"""The Kafka-to-Iceberg job against Apache Kafka, on both of its sources: every message exactly once.

``make test`` runs each case on Spark's connector, ``make test-kafka`` on the Python source too.

The topic: 40,000 JSON messages over 4 partitions (:mod:`tests.support.kafka_messages`).
Halfway, the messages gain a field (``email``) and their ``counter`` outgrows 32 bits
(int to long); 0.5 % of the values are malformed (broken JSON, not JSON, not UTF-8, not an
object, tombstones). A message's (partition, offset) tells what it holds, so every row is
checked, not counted.

The claim each test checks: table rows + dead letters = messages produced, each
(partition, offset) exactly once, the malformed ones exactly in the dead-letter table,
and the table's schema evolved (``counter`` from int to long, ``email`` added). The job
runs in the test's process on icesink's Python source (``kafka.source: python``) and on
Spark's connector (``jvm``), whose jars the shared session has.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from icesink import ConfigError, failpoints, metrics_server
from icesink import sink as sink_module
from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from icesink.jobs.kafka.source.kafka_select import JVM_FORMAT, kafka_format
from icesink.maintenance import referenced_files
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import (
    JOB_TIMEOUT_S,
    SOURCES_PYTHON_IN_FULL,
    job_config,
    require_source,
    start_job,
    wait_for_batches,
)
from tests.support.kafka_messages import MessageSet, Produced, check_exactly_once
from tests.support.tables import catalog_from_options, check_data_files

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

MESSAGES = MessageSet(count=40_000, partitions=4, malformed_every=200, evolve_at=20_000)
PER_BATCH = 10_000  # 4 micro-batches


@pytest.fixture(scope="module")
def events(apache_kafka: KafkaBroker) -> Produced:
    return MESSAGES.produce(apache_kafka, f"events-{os.getpid()}")


def sink_options_of(config: Any) -> dict[str, str]:
    return {k: str(v) for k, v in config.sink_options().items()}


def check_schema_evolved(options: dict[str, str], table_name: str) -> None:
    table = catalog_from_options(options).load_table(table_name)
    first, current = table.metadata.schemas[0], table.schema()
    assert str(first.find_field("counter").field_type) == "int"
    assert "email" not in {f.name for f in first.fields}
    assert str(current.find_field("counter").field_type) == "long"
    assert str(current.find_field("email").field_type) == "string"
    assert str(current.find_field("ts").field_type) == "string"  # JSON strings stay strings


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_job_ingests_every_message_once_and_evolves_the_schema(
    spark: Any,
    apache_kafka: KafkaBroker,
    events: Produced,
    source: str,
    tmp_path: Path,
    metrics_exports: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    require_source(source)
    table = "e2e.events_once"
    servers = apache_kafka.bootstrap_servers
    config = validate(job_config(servers, events.topic, tmp_path, table, PER_BATCH, source))
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
    print(f"\n{MESSAGES.count:,} messages in {time.monotonic() - started:.0f} s")  # for the record
    options = sink_options_of(config)
    check_exactly_once(catalog_from_options(options), table, MESSAGES, events)
    check_schema_evolved(options, table)
    loaded = catalog_from_options(options).load_table(table)
    assert len(loaded.snapshots()) >= MESSAGES.count // PER_BATCH  # a commit per micro-batch at least
    assert served["icesink_rows_written_total"] == MESSAGES.count - len(events.malformed)
    assert served["icesink_dead_letter_rows_total"] == len(events.malformed)


# The routed job's SIGKILL test (tests/e2e/test_kafka_routing.py) kills this job's process
# in make test; this one, twice at seeded random moments, is in make test-faults.
@pytest.mark.faults_full
@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_sigkilled_twice_then_restarted_ends_with_the_same_result(
    apache_kafka: KafkaBroker, events: Produced, source: str, tmp_path: Path
) -> None:
    require_source(source)
    seed = int(os.environ.get("ICESINK_KILL_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    table = "e2e.events_killed"
    servers = apache_kafka.bootstrap_servers
    data = job_config(servers, events.topic, tmp_path, table, PER_BATCH // 2, source)  # 8 micro-batches
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

    options = sink_options_of(validate(data))
    check_exactly_once(catalog_from_options(options), table, MESSAGES, events)
    check_schema_evolved(options, table)
    for name in (table, f"{table}__dlq"):
        loaded = catalog_from_options(options).load_table(name)
        referenced = referenced_files(loaded)  # of every snapshot kept: compaction's inputs stay until expiry
        data_dir = Path(loaded.location().removeprefix("file://")) / "data"
        on_disk = {f"file://{p}" for p in data_dir.rglob("*.parquet")}
        assert on_disk <= referenced, f"seed {seed}: files of crashed attempts left in {name}"


def test_a_failing_batch_ends_the_job_with_code_1_after_its_restarts(
    spark: Any,
    apache_kafka: KafkaBroker,
    tmp_path: Path,
    metrics_exports: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = f"strict-{os.getpid()}"
    apache_kafka.create_topic(topic, 1)
    apache_kafka.produce(topic, [(0, None, b'{"n": 1}'), (0, None, b"oops")])
    servers = apache_kafka.bootstrap_servers
    data = job_config(servers, topic, tmp_path, "e2e.strict", 100, "python", **{"max-restarts": 1})
    data["sink"]["on-bad-record"] = "fail"
    with caplog.at_level(logging.WARNING, logger="icesink.jobs.kafka.job"):
        assert run(validate(data), spark) == 1
    assert "restart 1 of 1" in caplog.text and "restart 2" not in caplog.text
    assert not catalog_from_options({k: str(v) for k, v in data["sink"].items()}).table_exists("e2e.strict")


def test_sigterm_stops_a_running_job(
    spark: Any, apache_kafka: KafkaBroker, tmp_path: Path, metrics_exports: None
) -> None:
    topic = f"endless-{os.getpid()}"
    apache_kafka.create_topic(topic, 1)
    apache_kafka.produce(topic, [(0, None, json.dumps({"n": i}).encode()) for i in range(10)])
    data = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, "e2e.endless", 100, "python")
    data["trigger"] = {"interval": "1 second"}  # runs until stopped
    timer = threading.Timer(20.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        assert run(validate(data), spark) == 0
    finally:
        timer.cancel()
    rows = catalog_from_options({k: str(v) for k, v in data["sink"].items()}).load_table("e2e.endless")
    assert rows.scan().to_arrow().num_rows == 10


def test_the_jvm_source_is_chosen_when_on_the_classpath_and_named_when_missing(spark: Any) -> None:
    require_source("jvm")
    assert kafka_format(spark, "auto") == JVM_FORMAT  # the tests' session has the fetched jars
    assert kafka_format(spark, "python") == "icesink-kafka"
    connect_like = SimpleNamespace(version=spark.version)  # no JVM to ask, as through Spark Connect
    with pytest.raises(ConfigError, match="spark-sql-kafka-0-10"):
        kafka_format(connect_like, "jvm")


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_a_failed_query_starts_again_from_its_checkpoint_and_each_message_lands_once(
    spark: Any,
    apache_kafka: KafkaBroker,
    source: str,
    tmp_path: Path,
    metrics_exports: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    require_source(source)
    topic = f"restarted-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic, 2)
    apache_kafka.produce(topic, [(i % 2, None, json.dumps({"n": i}).encode()) for i in range(3_000)])
    restarts = {"max-restarts": 2}
    servers = apache_kafka.bootstrap_servers
    data = job_config(servers, topic, tmp_path, "e2e.restarted", 1_000, source, **restarts)
    # The first batch's files are written, then foreachBatch fails before they are staged.
    failpoints.arm("stage")
    try:
        with caplog.at_level(logging.WARNING, logger="icesink.jobs.kafka.job"):
            assert run(validate(data), spark) == 0
    finally:
        failpoints.disarm_all()
    assert "restart 1 of 2" in caplog.text and "restart 2" not in caplog.text
    options = {k: str(v) for k, v in data["sink"].items()}
    table = catalog_from_options(options).load_table("e2e.restarted")
    assert sorted(table.scan().to_arrow().column("n").to_pylist()) == list(range(3_000))
    assert check_data_files(table) > 0  # every referenced file there, its statistics its content's
