"""Spark processes outside the test process: the environment of Spark's scripts, and drivers run as scripts.

The session-wide local Spark fixture owns the test process's one SparkContext, so a test
that needs another driver (on a standalone cluster, or a Spark Connect client) runs it
as a subprocess with this interpreter and reads its result as JSON from stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyspark

from tests.support.scripts import SCRIPT_TIMEOUT_S, run_script

JVM_START_TIMEOUT_S = 180.0
"""A JVM takes seconds to start, and much longer on a loaded two-core machine."""
_FOLDERS = ("logs", "pids", "local", "conf")


def spark_home() -> Path:
    """The installed pyspark package folder, which is a Spark distribution."""
    return Path(pyspark.__file__).resolve().parent


def spark_environment(workdir: Path) -> dict[str, str]:
    """The environment of a Spark daemon or driver: loopback only, this interpreter in Python workers.

    Logs, pid files, scratch space and an empty configuration folder are under ``workdir``
    (created here).
    """
    for folder in _FOLDERS:
        (workdir / folder).mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOG_DIR": str(workdir / "logs"),
        "SPARK_PID_DIR": str(workdir / "pids"),
        "SPARK_LOCAL_DIRS": str(workdir / "local"),
        "SPARK_CONF_DIR": str(workdir / "conf"),  # empty: no site settings leak in
    }


def run_driver(
    script: Path, arguments: Mapping[str, Any], workdir: Path, timeout_s: float = SCRIPT_TIMEOUT_S
) -> dict[str, Any]:
    """Run a driver script with Spark's loopback environment; the JSON object of its last output line.

    See :mod:`tests.support.scripts` for how arguments and results travel.
    """
    return run_script(script, arguments, env=spark_environment(workdir), cwd=workdir, timeout_s=timeout_s)
