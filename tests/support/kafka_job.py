"""The Kafka-to-Iceberg job in the tests: its configuration, and the job as a subprocess.

:func:`job_config` is the configuration the end-to-end tests start from (a SQLite catalog
and a warehouse in the test's folder, one table); :func:`start_job` runs the installed
command on a YAML file, watched through its checkpoint.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from icesink.jobs.jvm_jars import spark_kafka_jars

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 900
SOURCES = ("python", "jvm")
"""The job's two Kafka sources: icesink's Python source and Spark's connector."""
SOURCES_JVM_IN_FULL = ("python", pytest.param("jvm", marks=pytest.mark.kafka_full))
"""Both sources, Spark's connector only in ``make test-kafka``: for tests that start servers of their own."""
SOURCES_PYTHON_IN_FULL = (pytest.param("python", marks=pytest.mark.kafka_full), "jvm")
"""Both sources, the Python source only in ``make test-kafka``: ``make test`` runs the behaviour on
Spark's connector, the source users run, and the Python source's own tests (its offsets, its
topics, its restarts) in ``tests/integration/test_kafka_source.py``."""


def require_source(source: str) -> None:
    """Skip a test of Spark's connector when ``make env`` did not fetch its jars (fail in CI)."""
    if source == "jvm" and not spark_kafka_jars():
        message = "Spark's Kafka source was not fetched; make env fetches it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def job_config(
    bootstrap_servers: str,
    topic: str,
    tmp_path: Path,
    table: str,
    max_offsets: int,
    source: str,
    **extra: Any,
) -> dict[str, Any]:
    """The job's configuration: ``topic`` into ``table``, ``max_offsets`` messages a micro-batch."""
    return {
        "kafka": {
            "bootstrap-servers": bootstrap_servers,
            "topics": [topic],
            "starting-offsets": "earliest",
            "max-offsets-per-trigger": max_offsets,
            "source": source,
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


def start_job(config_file: Path, log: Path, *flags: str) -> subprocess.Popen[bytes]:
    """The job's command (``python -m icesink.jobs.kafka.job``, what ``icesink-kafka-to-iceberg``
    runs), in its own process group (so a kill takes the JVM too)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "icesink.jobs.kafka.job", "--config", str(config_file), *flags],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def started_batches(checkpoint: Path) -> int:
    """How many micro-batches the query of ``checkpoint`` has started in its lifetime (its offset log)."""
    offsets_log = checkpoint / "offsets"
    return len([p for p in offsets_log.glob("*") if p.name.isdigit()]) if offsets_log.exists() else 0


def wait_for_batches(job: subprocess.Popen[bytes], offsets_log: Path, count: int, log: Path) -> None:
    """Wait until the query has started ``count`` micro-batches in its lifetime (its offset log)."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        if started_batches(offsets_log.parent) >= count:
            return
        if job.poll() is not None:
            raise AssertionError(f"the job ended (code {job.returncode}) early:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)
    raise AssertionError(f"the job did not reach micro-batch {count - 1}:\n{log.read_text()[-4000:]}")
