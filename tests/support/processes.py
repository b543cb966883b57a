"""Server processes started by tests (:mod:`icesink.jobs.local_servers.processes`), and missing binaries.

The servers' code is shared with ``make demo-cluster``; what is the tests' own is how a
missing binary is treated: a skip on a developer's machine, a failure in CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from icesink.jobs.local_servers.processes import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    ServerProcess,
    die_with_parent,
    find_binary,
    free_port,
    free_ports,
    http_get,
    port_open,
    start_all,
    wait_until,
)

__all__ = [
    "START_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "ServerProcess",
    "die_with_parent",
    "free_port",
    "free_ports",
    "http_get",
    "port_open",
    "require_binary",
    "start_all",
    "wait_until",
]


def require_binary(name: str, path: str | None = None) -> str:
    """The path of ``name`` (or ``path`` when given and executable); skip the test when missing, fail in CI.

    ``make test`` installs the system packages (``scripts/install_system_deps.sh``), so in
    CI a missing binary is a broken setup, not a reason to skip.
    """
    found = find_binary(name, path)
    if found is not None:
        return found
    message = f"{name} is not installed; run ./scripts/install_system_deps.sh (make test does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


ROOT = Path(__file__).resolve().parents[2]


def spawn_evolving_writer(
    tmp_path: Path, writer: str, options: dict[str, str], go: Path
) -> subprocess.Popen[str]:
    """Another driver on the same table (:mod:`tests.support.evolving_job`), streaming once ``go`` exists.

    It reads ``tmp_path/in/<writer>``, checkpoints under ``tmp_path/ck/<writer>``, touches
    ``tmp_path/<writer>.ready`` when set up, and dies with the test process.
    """
    args = ["--input", str(tmp_path / "in" / writer), "--checkpoint", str(tmp_path / "ck" / writer)]
    args += ["--options", json.dumps(options), "--ready", str(tmp_path / f"{writer}.ready"), "--go", str(go)]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.evolving_job", *args],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=die_with_parent,  # noqa: PLW1509 (only a prctl call)
    )
