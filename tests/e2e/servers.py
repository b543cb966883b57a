"""Real Prometheus and Pushgateway servers for end-to-end tests (Debian's packages).

Both listen on a free port of 127.0.0.1 only, keep their data under the test's
temporary folder, and stop on :meth:`stop`, at interpreter exit, and, through
``PR_SET_PDEATHSIG``, when the test process dies without cleaning up.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

START_TIMEOUT_S = 30.0
_PR_SET_PDEATHSIG = 1

_live: weakref.WeakSet[_Server] = weakref.WeakSet()

T = TypeVar("T")


def require_binary(name: str) -> str:
    """The path of ``name``; skip the test when it is missing, but fail in CI.

    ``make test`` installs Prometheus (``scripts/install_system_deps.sh``), so in CI a
    missing binary is a broken setup, not a reason to skip.
    """
    path = shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not installed; run ./scripts/install_system_deps.sh (make test does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return str(response.read().decode())


def wait_until(check: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.25) -> T:
    """Poll ``check`` until it returns something true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # the server may not be up yet
            last_error = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:.0f}s waiting for {what} (last error: {last_error})"
            )
        time.sleep(interval_s)


class _Server:
    """A server process bound to 127.0.0.1:<free port>."""

    name = "server"

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = 0
        self.log_path = workdir / f"{self.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _ready(self) -> bool:
        raise NotImplementedError

    def start(self, attempts: int = 3) -> None:
        """Start and wait until ready; retry on another port if the chosen one was taken meanwhile."""
        for _ in range(attempts):
            self.port = free_port()
            with self.log_path.open("ab") as log:
                self._process = subprocess.Popen(
                    self._command(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,  # noqa: PLW1509 (only a prctl call)
                )
            _live.add(self)
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline and self._process.poll() is None:
                with contextlib.suppress(OSError):
                    if self._ready():
                        return
                time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"{self.name} did not start; its log:\n{self.log_tail()}")

    def stop(self) -> None:
        """Terminate the process (safe twice)."""
        process, self._process = self._process, None
        _live.discard(self)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


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


def _die_with_parent() -> None:
    """In the child, before exec: have the kernel kill it when the test process dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_live):
        server.stop()
