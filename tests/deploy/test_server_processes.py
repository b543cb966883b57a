"""The servers of the tests never outlive the test process, however it ends."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest

from tests.support.postgres import SYSTEM_USER
from tests.support.processes import wait_until
from tests.support.scripts import start_script

pytestmark = pytest.mark.deploy

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "tests" / "support" / "orphaned_servers_job.py"
GONE_TIMEOUT_S = 30.0


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_servers_die_with_a_killed_test_process(tmp_path: Path) -> None:
    owner = start_script(JOB, {"workdir": str(tmp_path)}, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert owner.stdout is not None
        started = json.loads(owner.stdout.readline() or "{}")
        pids: dict[str, int] = started.get("pids", {})
        if os.geteuid() == 0 and "postgresql" in pids:  # the kill must survive PostgreSQL's change of user
            assert psutil.Process(pids["postgresql"]).username() == SYSTEM_USER
    finally:
        owner.send_signal(signal.SIGKILL)  # no atexit, no fixture teardown: only the kernel can help
        owner.wait()
    assert set(pids) == {"seaweedfs", "postgresql"}, owner.stderr.read() if owner.stderr else ""

    try:
        wait_until(
            lambda: not any(running(pid) for pid in pids.values()),
            GONE_TIMEOUT_S,
            f"servers {pids} to stop after their owner was killed",
        )
    finally:
        for folder in started.get("leftovers", []):
            shutil.rmtree(folder, ignore_errors=True)
