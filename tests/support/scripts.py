"""Python scripts run as child processes of a test, talking JSON: arguments on stdin, result on stdout.

Credentials travel on standard input, not the command line, so they stay out of the
process list. The child dies with the test process (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.processes import die_with_parent

SCRIPT_TIMEOUT_S = 300.0


def start_script(
    script: Path,
    arguments: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[str]:
    """Start ``script`` with this interpreter and hand it ``arguments``; do not wait."""
    process = subprocess.Popen(
        [sys.executable, str(script.resolve())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
        cwd=cwd,
        preexec_fn=die_with_parent,  # noqa: PLW1509 (only a prctl call)
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(dict(arguments)))
    process.stdin.close()
    process.stdin = None  # so that communicate() does not flush it again
    return process


def script_result(process: subprocess.Popen[str], timeout_s: float = SCRIPT_TIMEOUT_S) -> dict[str, Any]:
    """Wait for a started script; the JSON object on the last line of its output.

    Raises:
        AssertionError: The script failed (with the tail of its error output).
    """
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        raise AssertionError(
            f"{process.args!r} did not finish in {timeout_s:.0f}s:\n{stderr[-6000:]}"
        ) from None
    if process.returncode != 0:
        raise AssertionError(
            f"{process.args!r} exited with {process.returncode}:\n{stderr[-6000:]}\n{stdout[-2000:]}"
        )
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def run_script(
    script: Path,
    arguments: Mapping[str, Any],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = SCRIPT_TIMEOUT_S,
) -> dict[str, Any]:
    """Run ``script`` to its end; the JSON object of its last output line."""
    return script_result(start_script(script, arguments, env=env, cwd=cwd), timeout_s)
