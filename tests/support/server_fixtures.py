"""Fixtures of real servers on loopback, as a pytest plugin every test folder can use.

The root ``tests/conftest.py`` lists this module in ``pytest_plugins``: a server starts on
the first test that asks for it, at most once per run, and stops with its scope (and with
the test process, whatever kills it). SeaweedFS (S3 and an Iceberg REST catalog) and
PostgreSQL are shared by the whole run. The Spark cluster and the Spark Connect server are
JVMs holding memory while they idle, and one module uses each: they stop at the end of
that module (scope them by session again when a second module needs them). Start times are
printed in the test summary.

Import nothing from here into a conftest: a fixture imported into a conftest as well would
start its server twice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import SeaweedFS
from tests.support.spark_cluster import SparkCluster
from tests.support.spark_connect import SparkConnectServer

START_SECONDS: dict[str, float] = {}
"""Seconds each server took to come up, for the summary."""


@contextlib.contextmanager
def timed_start(name: str) -> Iterator[None]:
    """Record how long the block (creating and starting one server) took."""
    started = time.monotonic()
    yield
    START_SECONDS[name] = time.monotonic() - started


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """One SeaweedFS for the run: S3 with the buckets ``warehouse`` and ``iceberg-tables``, a REST catalog."""
    with timed_start("seaweedfs"):
        server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
        server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    """One PostgreSQL for the run (initdb included); its ``sqlalchemy_uri()`` is a SQL catalog's ``uri``."""
    with timed_start("postgresql"):
        server = PostgresServer(tmp_path_factory.mktemp("postgresql"))
        server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A standalone Master with two 1-core, 1 GiB Workers; drivers run as subprocesses."""
    cluster = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), workers=2)
    with timed_start("spark cluster (master + 2 workers)"):
        cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server on ``local[2]``; clients run as subprocesses."""
    with timed_start("spark connect"):
        server = SparkConnectServer(tmp_path_factory.mktemp("spark-connect"))
        server.start()
    yield server
    server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if START_SECONDS:
        terminalreporter.section("server start times")
        for name, seconds in START_SECONDS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
