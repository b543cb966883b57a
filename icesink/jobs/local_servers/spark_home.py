"""The Spark distribution inside pyspark's wheel, and the environment of its scripts on loopback."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyspark

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
