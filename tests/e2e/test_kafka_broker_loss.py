"""The Kafka job without its broker, on both sources: it fails soon, with the coded error first in sight.

- At start-up, against an address where no broker listens (on Spark's connector in ``make
  test``, on both in ``make test-kafka``): exit code 1 with
  ``ICESINK-KAFKA-SOURCE`` naming the brokers. The Python source gives up once the default
  ``kafka.broker-timeout-s`` (30 s) ran out, which the error states (its deadline is kept
  by the source's monotonic clock, :mod:`tests.unit.test_kafka_offset_deadline`); Spark's
  connector after three offset requests of ``default.api.timeout.ms`` each (2 s here).
  The test waits as long as a job may take on a loaded machine rather than timing it.
- Mid-run, an Apache Kafka broker of the test's own stopped after the first micro-batch:
  the query fails the same way, and ``max-restarts`` starts it again once, which fails again.
- In the test's process, the job's metrics after the broker is lost:
  ``icesink_source_connected`` 0 and the lag NaN (unknown), where the lag stayed at its last
  value (0) and a dead broker looked like an idle topic.
- A broker restarted while the job runs: the job (with ``max-restarts``) goes on, and every
  record produced before and after lands once.

Each test but the first starts a broker of its own: on Spark's connector they run in ``make
test-kafka`` (``kafka_full``), on the Python source in ``make test``. With the Python source,
librdkafka's log lines (``Connect to ... failed``) are counted: a
few per client at most, where there were about 17 a second, so that the error is what a
user reads.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from icesink.metrics import SinkMetrics
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import (
    JOB_TIMEOUT_S,
    SOURCES_JVM_IN_FULL,
    SOURCES_PYTHON_IN_FULL,
    require_source,
    start_job,
)
from tests.support.processes import wait_until
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

CLIENT_LINES_AT_MOST = 24
_CLIENT_LINE = re.compile(r"Connect to \S+ failed|Connection refused|brokers are down")
LOST_TIMEOUT_S = 5  # how long the source waits for a lost broker, here
RESTART_TIMEOUT_S = 240.0  # bounds a wait: a restarted broker and query on a loaded machine


@pytest.fixture()
def own_kafka(tmp_path: Path) -> Iterator[KafkaBroker]:
    """An Apache Kafka broker of the test's own, which it may stop (the shared one stays up)."""
    broker = KafkaBroker(tmp_path / "kafka")
    (tmp_path / "kafka").mkdir()
    broker.start()
    yield broker
    broker.stop()


def job_data(tmp_path: Path, bootstrap: str, topic: str, source: str, **extra: Any) -> dict[str, Any]:
    """The job of ``topic``, waiting ``LOST_TIMEOUT_S`` for a broker that does not answer."""
    kafka: dict[str, Any] = {
        "bootstrap-servers": bootstrap,
        "topics": [topic],
        "starting-offsets": "earliest",
    }
    if source == "python":
        kafka["broker-timeout-s"] = LOST_TIMEOUT_S
    else:  # Spark's connector: its admin client's wait for each of its three offset requests
        kafka["options"] = {"default.api.timeout.ms": str(LOST_TIMEOUT_S * 1000 // 3)}
    return {
        "kafka": {**kafka, "source": source},
        "sink": {
            "table": "e2e.lost",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
            "catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
            "metrics.port": None,
        },
        "checkpoint-location": str(tmp_path / "checkpoint"),
        "spark": {"master": "local[1]", "conf": {"spark.ui.enabled": "false"}},
        **extra,
    }


def run_to_end(tmp_path: Path, data: dict[str, Any], log: Path, started: Any = None) -> str:
    config = tmp_path / "job.yaml"
    config.write_text(yaml.safe_dump(data))
    job = start_job(config, log)
    try:
        if started is not None:
            started(job)
        assert job.wait(JOB_TIMEOUT_S) == 1, log.read_text()[-4000:]
    except subprocess.TimeoutExpired:
        raise AssertionError(f"no failure within {JOB_TIMEOUT_S} s:\n{log.read_text()[-4000:]}") from None
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    return log.read_text(errors="replace")


def client_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if _CLIENT_LINE.search(line)]


def produce_numbers(broker: KafkaBroker, topic: str, numbers: range) -> None:
    broker.produce(topic, [(0, None, json.dumps({"n": n}).encode()) for n in numbers])


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_no_broker_at_start_up_fails_with_the_coded_error_naming_the_brokers(
    source: str, tmp_path: Path
) -> None:
    require_source(source)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    data = job_data(tmp_path, address, "orders", source, trigger={"available-now": True})
    if source == "python":
        del data["kafka"]["broker-timeout-s"]  # the default, which the error states
    text = run_to_end(tmp_path, data, tmp_path / "job.log")
    if source == "python":
        assert (
            "query failed: ICESINK-KAFKA-SOURCE: could not list topics after 3 attempts within 30 s" in text
        )
        assert f"bootstrap_servers={address}" in text
        assert len(client_lines(text)) <= CLIENT_LINES_AT_MOST, "\n".join(client_lines(text)[:40])
    else:
        assert f"ICESINK-KAFKA-SOURCE: Spark's Kafka source failed on the brokers at {address}" in text
        assert "org.apache.kafka.common.errors.TimeoutException" in text


@pytest.mark.parametrize("source", SOURCES_JVM_IN_FULL)
def test_a_broker_lost_mid_run_fails_the_query_and_its_restart(
    own_kafka: KafkaBroker, source: str, tmp_path: Path
) -> None:
    require_source(source)
    own_kafka.create_topic("orders", 1)
    produce_numbers(own_kafka, "orders", range(5))
    data = job_data(
        tmp_path,
        own_kafka.bootstrap_servers,
        "orders",
        source,
        trigger={"interval": "1 second"},
        **{"max-restarts": 1},
    )
    log = tmp_path / "job.log"

    def lose_the_broker(job: subprocess.Popen[bytes]) -> None:
        # Micro-batch 0 committed and 1 not started (no new record): the query waits for records.
        committed = tmp_path / "checkpoint" / "commits" / "0"
        while not committed.exists():
            assert job.poll() is None, log.read_text()[-4000:]
            time.sleep(0.2)
        (tmp_path / "job.log.mark").write_text(str(len(log.read_text(errors="replace"))))
        own_kafka.stop()

    text = run_to_end(tmp_path, data, log, lose_the_broker)
    after = text[int((tmp_path / "job.log.mark").read_text()) :]
    assert after.count("ICESINK-KAFKA-SOURCE") >= 2, after[-4000:]  # the query's and its restart's
    assert "restart 1 of 1" in after
    if source == "python":
        assert f"within {LOST_TIMEOUT_S} s" in after
        assert len(client_lines(after)) <= CLIENT_LINES_AT_MOST, "\n".join(client_lines(after)[:40])
    else:
        assert f"Spark's Kafka source failed on the brokers at {own_kafka.bootstrap_servers}" in after


@pytest.mark.parametrize("source", SOURCES_JVM_IN_FULL)
def test_a_lost_broker_shows_in_the_metrics_as_disconnected_and_an_unknown_lag(
    spark: Any, own_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    done = threading.Event()
    committed = tmp_path / "checkpoint" / "commits" / "0"

    def lose_the_broker_after_the_first_batch() -> None:
        while not committed.exists() and not done.wait(0.1):
            pass
        own_kafka.stop()

    own_kafka.create_topic("orders", 1)
    produce_numbers(own_kafka, "orders", range(5))
    data = job_data(tmp_path, own_kafka.bootstrap_servers, "orders", source, trigger={"interval": "1 second"})
    data["sink"]["metrics.port"] = 0  # served (on a free port): the progress listener reports the lag
    metrics = SinkMetrics()
    loser = threading.Thread(target=lose_the_broker_after_the_first_batch, daemon=True)
    loser.start()
    try:
        assert run(validate(data), spark, metrics) == 1
    finally:
        done.set()
        loser.join()
    assert committed.exists()  # the query read the topic before the broker went
    values = {
        sample.name: sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.labels.get("table") == "e2e.lost"
        and sample.name in ("icesink_source_connected", "icesink_source_offsets_behind_latest")
    }
    assert values.get("icesink_source_connected") == 0, values
    assert math.isnan(values["icesink_source_offsets_behind_latest"]), values


@pytest.mark.parametrize("source", SOURCES_JVM_IN_FULL)
def test_a_broker_restarted_while_the_job_runs_loses_and_repeats_no_record(
    spark: Any, own_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    own_kafka.create_topic("orders", 1)
    produce_numbers(own_kafka, "orders", range(100))
    data = job_data(
        tmp_path,
        own_kafka.bootstrap_servers,
        "orders",
        source,
        trigger={"interval": "1 second"},
        **{"max-restarts": 3},
    )
    catalog = catalog_from_options({k: str(v) for k, v in validate(data).sink_options().items()})
    failures: list[BaseException] = []
    ended, ending = threading.Event(), threading.Lock()

    def rows() -> int:
        if not catalog.table_exists("e2e.lost"):
            return 0
        return int(catalog.load_table("e2e.lost").scan().to_arrow().num_rows)

    def restart_produce_and_stop() -> None:
        try:
            wait_until(lambda: ended.is_set() or rows() == 100, RESTART_TIMEOUT_S, "the first 100 records")
            own_kafka.restart()  # on the same port, its records kept
            produce_numbers(own_kafka, "orders", range(100, 250))
            wait_until(
                lambda: ended.is_set() or rows() >= 250, RESTART_TIMEOUT_S, "the records produced after"
            )
        except BaseException as e:  # reported by the test's thread
            failures.append(e)
        finally:
            with ending:
                if not ended.is_set():  # only while the job's handler is there to take it
                    os.kill(os.getpid(), signal.SIGTERM)  # the job stops its query between micro-batches
            # The kernel stops the restarted broker when the thread that started it ends: not before the job
            ended.wait(RESTART_TIMEOUT_S)

    worker = threading.Thread(target=restart_produce_and_stop, daemon=True)
    worker.start()
    try:
        code = run(validate(data), spark)
    finally:
        with ending:
            ended.set()
        worker.join()
    assert not failures, failures
    assert code == 0
    numbers = catalog.load_table("e2e.lost").scan().to_arrow().column("n").to_pylist()
    assert sorted(numbers) == list(range(250))
