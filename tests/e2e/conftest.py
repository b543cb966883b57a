"""Fixtures of the end-to-end tests: real Prometheus and Pushgateway servers.

The Kafka broker is Apache Kafka, one for the whole run: the ``apache_kafka`` fixture of
:mod:`tests.support.server_fixtures`; each test creates its own topics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from icesink import metrics_server
from tests.e2e.servers import PrometheusServer, Pushgateway, require_binary

REPO = Path(__file__).resolve().parents[2]
MONITORING = REPO / "monitoring"
RULES = MONITORING / "prometheus" / "rules" / "icesink.rules.yml"
RULE_TESTS = MONITORING / "prometheus" / "tests" / "icesink.rules.test.yml"
DASHBOARD = MONITORING / "grafana" / "dashboards" / "icesink.json"


@pytest.fixture(scope="session")
def promtool() -> str:
    return require_binary("promtool")


@pytest.fixture()
def start_prometheus(tmp_path: Path) -> Iterator[Callable[[Sequence[str]], PrometheusServer]]:
    """Start a Prometheus scraping the given ``host:port`` targets each second, with icesink's rules.

    Every server started is stopped at the end of the test.
    """
    binary = require_binary("prometheus")
    servers: list[PrometheusServer] = []

    def start(targets: Sequence[str]) -> PrometheusServer:
        workdir = tmp_path / f"prometheus-{len(servers)}"
        workdir.mkdir()
        server = PrometheusServer(binary, workdir, targets, [RULES])
        servers.append(server)
        server.start()
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture()
def pushgateway(tmp_path: Path) -> Iterator[Pushgateway]:
    server = Pushgateway(require_binary("prometheus-pushgateway"), tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def metrics_exports() -> Iterator[None]:
    """Stop the process's metrics servers and pushers after the test."""
    yield
    metrics_server.shutdown()
