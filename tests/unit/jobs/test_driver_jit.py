"""The Kafka job's driver JVM compiles with C1 only, unless its configuration chooses otherwise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pyspark import SparkContext

from icesink.jobs.kafka.job.main import session_conf
from icesink.jobs.kafka.job.validate import validate
from icesink.jobs.spark import C1_ONLY, DRIVER_JAVA_OPTIONS, with_c1_only

ROOT = Path(__file__).resolve().parents[3]
JOB = {
    "kafka": {"bootstrap-servers": "broker:9092", "topics": ["orders"], "source": "python"},
    "sink": {"table": "db.orders", "catalog.type": "sql", "catalog.uri": "sqlite:////tmp/c.db"},
    "checkpoint-location": "/tmp/ck",
}


@pytest.fixture()
def no_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a job's process before its session: no JVM started yet."""
    monkeypatch.setattr(SparkContext, "_gateway", None)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)


def test_c1_only_goes_after_the_drivers_given_options(no_gateway: None) -> None:
    assert with_c1_only({}) == {DRIVER_JAVA_OPTIONS: C1_ONLY}
    given = {DRIVER_JAVA_OPTIONS: "-Dmy.flag=1", "a": "b"}
    assert with_c1_only(given) == {DRIVER_JAVA_OPTIONS: f"-Dmy.flag=1 {C1_ONLY}", "a": "b"}


@pytest.mark.parametrize("chosen", ["-XX:TieredStopAtLevel=4", "-XX:-TieredCompilation"])
def test_a_configuration_that_chooses_the_tiers_keeps_its_choice(no_gateway: None, chosen: str) -> None:
    given = {DRIVER_JAVA_OPTIONS: f"-Dmy.flag=1 {chosen}"}
    assert with_c1_only(given) == given


def test_a_running_jvm_gets_no_options(no_gateway: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")  # started by spark-submit: too late
    assert with_c1_only({"a": "b"}) == {"a": "b"}


def test_the_jobs_session_asks_for_it_beside_its_own_settings(no_gateway: None) -> None:
    config = validate({**JOB, "spark": {"conf": {DRIVER_JAVA_OPTIONS: "-Dmy.flag=1", "spark.x": "y"}}})
    conf = session_conf(config)
    assert conf[DRIVER_JAVA_OPTIONS] == f"-Dmy.flag=1 {C1_ONLY}"
    assert conf["spark.x"] == "y"


SESSION = """
import sys
from icesink.jobs.kafka.job.main import session_conf
from icesink.jobs.kafka.job.validate import validate
from icesink.jobs.spark import get_spark
config = validate({
    "kafka": {"bootstrap-servers": "broker:9092", "topics": ["t"], "source": "python"},
    "sink": {"table": "db.t", "catalog.type": "sql", "catalog.uri": "sqlite:////tmp/c.db"},
    "checkpoint-location": "/tmp/ck",
    "spark": {"master": "local[1]", "conf": {"spark.ui.enabled": "false"}},
})
spark = get_spark("c1-check", "local[1]", session_conf(config))
jvm = spark.sparkContext._jvm
bean = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
print("TieredStopAtLevel=" + bean.getVMOption("TieredStopAtLevel").getValue())
spark.stop()
"""


def test_the_jobs_driver_jvm_runs_with_c1_only() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SESSION], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TieredStopAtLevel=1" in done.stdout.splitlines()
