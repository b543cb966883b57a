"""Shared fixtures: one local SparkSession per test session, SQLite catalogs in tmp_path."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# Real servers (SeaweedFS, PostgreSQL, Spark cluster, Spark Connect) for any test that asks.
pytest_plugins = ["tests.support.server_fixtures"]

# Python workers must run the interpreter of the tests (the virtual environment's).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


OPT_IN_MARKERS = {
    "faults_full": "part of the full fault matrix: make test-faults (-m faults_full)",
    "cluster_full": "a check of the Spark cluster the tests start: make test-deploy (-m cluster_full)",
    "kafka_full": "the Kafka job's longer matrix over its two sources: make test-kafka (-m kafka_full)",
    "interop_full": "Java's maintenance during a stream, more catalogs: make test-interop (-m interop_full)",
}
"""Markers of tests that run only when ``-m`` names them, and where they run instead."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests of an opt-in marker run only when ``-m`` names it (see ``OPT_IN_MARKERS``)."""
    selected = config.getoption("-m") or ""
    for marker, reason in OPT_IN_MARKERS.items():
        if marker in selected:
            continue
        skip = pytest.mark.skip(reason=reason)
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local[2] SparkSession shared by the whole test session.

    It has Spark's Kafka source on its class path when ``make env`` fetched it, so the Kafka
    job runs in the test's process on either source (``kafka.source``: ``jvm`` or ``python``).
    """
    from pyspark.sql import SparkSession

    from icesink.jobs.jvm_jars import with_spark_kafka_jars
    from icesink.jobs.spark import with_class_archive

    session = (
        SparkSession.builder.master("local[2]")
        .appName("icesink-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config(map=dict(with_class_archive({})))  # as the jobs' JVMs: Spark's classes mapped
        .config(map=dict(with_spark_kafka_jars({})))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture()
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse"
    path.mkdir()
    return path


@pytest.fixture()
def catalog_options(tmp_path: Path, warehouse: Path) -> dict[str, str]:
    """Sink options for an embedded SQLite catalog and a local warehouse in tmp_path."""
    return {
        "catalog.name": "test",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.warehouse": f"file://{warehouse}",
    }
