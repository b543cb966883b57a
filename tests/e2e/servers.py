"""Real Prometheus and Pushgateway servers for end-to-end tests (Debian's packages).

Both listen on a free port of 127.0.0.1 only, keep their data under the test's
temporary folder, and stop on :meth:`stop`, at interpreter exit, and, through
``PR_SET_PDEATHSIG``, when the test process dies without cleaning up
(:mod:`tests.support.processes`).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.processes import ServerProcess, free_port, http_get, require_binary, wait_until

__all__ = ["PrometheusServer", "Pushgateway", "free_port", "http_get", "require_binary", "wait_until"]


class _Server(ServerProcess):
    """A server process of one binary bound to 127.0.0.1:<free port>."""

    def __init__(self, binary: str, workdir: Path) -> None:
        super().__init__(workdir)
        self.binary = binary


class PrometheusServer(_Server):
    """Prometheus scraping ``targets`` every second, with the given rule files.

    Args:
        binary: The ``prometheus`` executable.
        workdir: Folder for the configuration, the TSDB and the log.
        targets: ``host:port`` of the metrics endpoints (job ``icesink``).
        rule_files: Rule files to load (evaluated every second).
    """

    name = "prometheus"

    def __init__(
        self, binary: str, workdir: Path, targets: Sequence[str], rule_files: Sequence[Path]
    ) -> None:
        super().__init__(binary, workdir)
        self.config_path = workdir / "prometheus.yml"
        config = {
            "global": {"scrape_interval": "200ms", "evaluation_interval": "1s", "scrape_timeout": "200ms"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [{"job_name": "icesink", "static_configs": [{"targets": list(targets)}]}],
        }
        self.config_path.write_text(json.dumps(config))  # JSON is YAML

    def _command(self) -> list[str]:
        return [
            self.binary,
            f"--config.file={self.config_path}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--storage.tsdb.path={self.workdir / 'data'}",
            "--log.level=warn",
        ]

    def _ready(self) -> bool:
        return http_get(f"{self.url}/-/ready").strip() != ""

    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>``; the ``data`` of a successful answer."""
        query = urllib.parse.urlencode(params)
        try:
            body = json.loads(http_get(f"{self.url}/api/v1/{path}?{query}"))
        except urllib.error.HTTPError as e:  # 400 for a query that does not parse
            raise AssertionError(f"Prometheus rejected {params}: {e.read().decode()}") from e
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query at the current time: the result vector."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", (expr, data)
        return list(data["result"])

    def value(self, expr: str) -> float:
        """The single value of a query returning one series."""
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])


class Pushgateway(_Server):
    """A Prometheus Pushgateway without persistence."""

    name = "pushgateway"

    def _command(self) -> list[str]:
        return [self.binary, f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"]

    def _ready(self) -> bool:
        return http_get(f"{self.url}/-/ready").strip() != ""
