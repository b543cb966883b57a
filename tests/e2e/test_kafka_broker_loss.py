"""The Kafka job (Python source) without a broker: it fails soon, with the coded error first in sight.

- At start-up, against an address where no broker listens: exit code 1 once the default
  ``kafka.broker-timeout-s`` (30 s) ran out, which the error states (its deadline is kept
  by the source's monotonic clock, :mod:`tests.unit.test_kafka_offset_deadline`); with
  Spark's start, well inside a minute on an idle machine. The test waits as long as a job
  may take on a loaded one rather than timing it.
- Mid-run, a broker of the test's own stopped after the first micro-batch: the query
  fails the same way, and ``max-restarts`` starts it again once, which fails again.

A third runs the job in the test's process to read its metrics after the broker is lost:
``icesink_source_connected`` 0 and the lag NaN (unknown), where the lag stayed at its last
value (0) and a dead broker looked like an idle topic.

The first two count librdkafka's log lines (``Connect to ... failed``): a few per client at most,
where there were about 17 a second, so that the error is what a user reads.
"""

from __future__ import annotations

import json
import math
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sink.metrics import SinkMetrics
from streaming_jobs.kafka.job.main import run
from streaming_jobs.kafka.job.validate import validate
from tests.support.kafka_job import JOB_TIMEOUT_S, start_job
from tests.support.tansu import TansuBroker

pytestmark = [pytest.mark.e2e]

CLIENT_LINES_AT_MOST = 24
_CLIENT_LINE = re.compile(r"Connect to \S+ failed|Connection refused|brokers are down")


def job_data(tmp_path: Path, bootstrap: str, topic: str, **extra: Any) -> dict[str, Any]:
    return {
        "kafka": {"bootstrap-servers": bootstrap, "topics": [topic], "starting-offsets": "earliest"},
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


def test_no_broker_at_start_up_fails_after_the_broker_timeout_with_the_coded_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    data = job_data(tmp_path, address, "orders", trigger={"available-now": True})
    text = run_to_end(tmp_path, data, tmp_path / "job.log")
    assert "query failed: ICESINK-KAFKA-SOURCE: could not list topics after 3 attempts within 30 s" in text
    assert f"bootstrap_servers={address}" in text
    assert len(client_lines(text)) <= CLIENT_LINES_AT_MOST, "\n".join(client_lines(text)[:40])


def test_a_broker_lost_mid_run_fails_the_query_and_its_restart(tmp_path: Path) -> None:
    broker = TansuBroker(log_dir=tmp_path).start()
    try:
        broker.create_topic("orders", 1)
        broker.produce("orders", [(0, None, json.dumps({"n": i}).encode()) for i in range(5)])
        data = job_data(
            tmp_path,
            broker.bootstrap_servers,
            "orders",
            trigger={"interval": "1 second"},
            **{"max-restarts": 1},
        )
        data["kafka"]["broker-timeout-s"] = 5
        log = tmp_path / "job.log"

        def lose_the_broker(job: subprocess.Popen[bytes]) -> None:
            # Micro-batch 0 committed and 1 not started (no new record): the query waits for records.
            committed = tmp_path / "checkpoint" / "commits" / "0"
            while not committed.exists():
                assert job.poll() is None, log.read_text()[-4000:]
                time.sleep(0.2)
            (tmp_path / "job.log.mark").write_text(str(len(log.read_text(errors="replace"))))
            broker.stop()

        text = run_to_end(tmp_path, data, log, lose_the_broker)
    finally:
        broker.stop()
    after = text[int((tmp_path / "job.log.mark").read_text()) :]
    assert after.count("ICESINK-KAFKA-SOURCE") >= 2, after[-4000:]  # the query's and its restart's
    assert "within 5 s" in after and "restart 1 of 1" in after
    assert len(client_lines(after)) <= CLIENT_LINES_AT_MOST, "\n".join(client_lines(after)[:40])


def test_a_lost_broker_shows_in_the_metrics_as_disconnected_and_an_unknown_lag(
    spark: Any, tmp_path: Path, metrics_exports: None
) -> None:
    broker = TansuBroker(log_dir=tmp_path).start()
    done = threading.Event()
    committed = tmp_path / "checkpoint" / "commits" / "0"

    def lose_the_broker_after_the_first_batch() -> None:
        while not committed.exists() and not done.wait(0.1):
            pass
        broker.stop()

    try:
        broker.create_topic("orders", 1)
        broker.produce("orders", [(0, None, json.dumps({"n": i}).encode()) for i in range(5)])
        data = job_data(tmp_path, broker.bootstrap_servers, "orders", trigger={"interval": "1 second"})
        data["kafka"]["broker-timeout-s"] = 2
        data["sink"]["metrics.port"] = 0  # served (on a free port): the progress listener reports the lag
        metrics = SinkMetrics()
        loser = threading.Thread(target=lose_the_broker_after_the_first_batch, daemon=True)
        loser.start()
        try:
            assert run(validate(data), spark, metrics) == 1
        finally:
            done.set()
            loser.join()
    finally:
        broker.stop()
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
