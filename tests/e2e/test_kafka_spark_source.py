"""The Kafka job on Spark's Kafka source (``kafka.source: jvm``) as a process of its own: lag, SIGKILL.

The broker is Apache Kafka (the ``apache_kafka`` fixture: KRaft, one node). The topic:
4,000 JSON messages over 4 partitions, one in 50 malformed (:mod:`tests.support.kafka_messages`).
The job runs as a process of its own, as deployed (its session gets the jars at start),
reports its Kafka lag from the source's progress, is SIGKILLed inside a micro-batch and
started again from its checkpoint: table rows + dead letters = messages, each (partition,
offset) once. What both sources do alike is tested on both in the test's process
(``test_kafka_to_iceberg.py``, ``test_kafka_topic_kinds.py``).
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
import yaml

from icesink.jobs.kafka.job.validate import validate
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import JOB_TIMEOUT_S, job_config, require_source, start_job, wait_for_batches
from tests.support.kafka_messages import MessageSet, Produced, check_exactly_once
from tests.support.processes import http_get, wait_until
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

MESSAGES = MessageSet(count=4_000, partitions=4, malformed_every=50)
PER_BATCH = 1_000  # 4 micro-batches
LAG_METRIC = "icesink_source_offsets_behind_latest"
LAG_TIMEOUT_S = 120.0  # bounds a wait: Spark reports a batch's progress asynchronously


@pytest.fixture(scope="module")
def events(apache_kafka: KafkaBroker) -> Produced:
    require_source("jvm")
    return MESSAGES.produce(apache_kafka, f"spark-source-{os.getpid()}")


def offsets_behind_latest(log: Path) -> int:
    """``icesink_source_offsets_behind_latest`` as the job's metrics endpoint serves it; 0 while absent."""
    served = re.search(r"metrics served at (http://127\.0\.0\.1:\d+/metrics)", log.read_text())
    if served is None:
        return 0
    lines = http_get(served[1]).splitlines()
    values = [float(line.split()[-1]) for line in lines if line.startswith(LAG_METRIC + "{")]
    return int(sum(values))


def test_sigkilled_job_on_sparks_source_ends_with_every_message_once(
    apache_kafka: KafkaBroker, events: Produced, tmp_path: Path
) -> None:
    table = "e2e.spark_source"
    data = job_config(apache_kafka.bootstrap_servers, events.topic, tmp_path, table, PER_BATCH, "jvm")
    del data["max-restarts"]
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(data))
    first_log = tmp_path / "job-killed.log"
    job = start_job(config_file, first_log)
    wait_for_batches(job, tmp_path / "checkpoint" / "offsets", 2, first_log)  # batch 1 started
    # The lag from the source's progress (latestOffset against endOffset) after some whole batches
    lag = wait_until(lambda: offsets_behind_latest(first_log), LAG_TIMEOUT_S, "the Kafka lag of batch 0")
    assert lag in range(MESSAGES.count - PER_BATCH, 0, -PER_BATCH), lag
    os.killpg(job.pid, signal.SIGKILL)  # the driver, the JVM and the Python workers at once
    assert job.wait(60) == -signal.SIGKILL

    final_log = tmp_path / "job-final.log"
    job = start_job(config_file, final_log)
    assert job.wait(JOB_TIMEOUT_S) == 0, final_log.read_text()[-4000:]
    assert "reading Kafka with Spark's connector" in final_log.read_text()

    options = {k: str(v) for k, v in validate(data).sink_options().items()}
    check_exactly_once(catalog_from_options(options), table, MESSAGES, events)
