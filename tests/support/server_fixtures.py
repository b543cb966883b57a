"""Fixtures of real servers on loopback, as a pytest plugin every test folder can use.

The root ``tests/conftest.py`` lists this module in ``pytest_plugins``: a server starts on
the first test that asks for it, at most once per run, and stops with its scope (and with
the test process, whatever kills it). SeaweedFS (S3 and an Iceberg REST catalog),
PostgreSQL, Apache Kafka (a KRaft broker and controller, about 5 s to start) and Apicurio
Registry (the schema registry, about 10 s) are shared by the whole run, and so is the Spark
Connect server (two modules use it). The Spark cluster is JVMs holding memory while they idle,
and one module uses it: it stops at the end of that module (scope it by session when a second
module needs it). Start times are printed in the test summary.

Import nothing from here into a conftest: a fixture imported into a conftest as well would
start its server twice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import pytest

from tests.support.apicurio_registry import ApicurioRegistry
from tests.support.iceberg_java.reader import IcebergJavaReader
from tests.support.kafka_broker import KafkaBroker
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


class Server(Protocol):
    """What a fixture needs of a server: start it, stop it."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


ServerT = TypeVar("ServerT", bound=Server)


def server_fixture(
    name: str,
    make: Callable[[Path], ServerT],
    *,
    title: str,
    doc: str,
    scope: Literal["session", "module"] = "session",
) -> Any:
    """A fixture ``name``: a server made in a temp folder of its own, started, stopped with ``scope``.

    Args:
        name: The fixture's name (and its temp folder's).
        make: The server, from its folder.
        title: How the test summary names it among the start times.
        doc: What the fixture gives (``pytest --fixtures`` shows it).
        scope: When it stops.
    """

    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerT]:
        with timed_start(title):
            server = make(tmp_path_factory.mktemp(name))
            server.start()
        yield server
        server.stop()

    fixture.__name__ = fixture.__qualname__ = name
    fixture.__doc__ = doc
    return pytest.fixture(scope=scope, name=name)(fixture)


seaweedfs = server_fixture(
    "seaweedfs",
    SeaweedFS,
    title="seaweedfs",
    doc="One SeaweedFS for the run: S3 (buckets ``warehouse``, ``iceberg-tables``) and a REST catalog.",
)
postgres = server_fixture(
    "postgres",
    PostgresServer,
    title="postgresql",
    doc="One PostgreSQL for the run (initdb included); its ``sqlalchemy_uri()`` is a SQL catalog's ``uri``.",
)
apache_kafka = server_fixture(
    "apache_kafka",
    KafkaBroker,
    title="apache kafka (KRaft broker + controller)",
    doc="One Apache Kafka broker and controller for the run (``bootstrap_servers``, ``produce``, ...).",
)
schema_registry = server_fixture(
    "schema_registry",
    ApicurioRegistry,
    title="schema registry (apicurio registry)",
    doc="One Apicurio Registry for the run: ``url`` (its Confluent API), ``register(subject, schema)``.",
)
spark_cluster = server_fixture(
    "spark_cluster",
    lambda folder: SparkCluster(folder, workers=2),
    title="spark cluster (master + 2 workers)",
    doc="A standalone Master with two 1-core, 1 GiB Workers; drivers run as subprocesses.",
    scope="module",
)
spark_connect = server_fixture(
    "spark_connect",
    SparkConnectServer,
    title="spark connect",
    doc="One Spark Connect server on ``local[2]`` for the run; clients run as subprocesses.",
)

iceberg_java = server_fixture(
    "iceberg_java",
    IcebergJavaReader,
    title="iceberg java (spark 4.1 reader)",
    doc="One Spark with Iceberg's runtime for the run, a second reader: ``.sql(query, catalog_options)``.",
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if START_SECONDS:
        terminalreporter.section("server start times")
        for name, seconds in START_SECONDS.items():
            terminalreporter.write_line(f"{name}: {seconds:.1f} s")
