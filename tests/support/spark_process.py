"""Spark processes outside the test process: the environment of Spark's scripts, and drivers run as scripts.

The session-wide local Spark fixture owns the test process's one SparkContext, so a test
that needs another driver (on a standalone cluster, or a Spark Connect client) runs it
as a subprocess with this interpreter and reads its result as JSON from stdout.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from icesink.jobs.local_servers.spark_home import JVM_START_TIMEOUT_S, spark_environment, spark_home
from tests.support.scripts import SCRIPT_TIMEOUT_S, run_script

__all__ = ["JVM_START_TIMEOUT_S", "run_driver", "spark_environment", "spark_home"]


def run_driver(
    script: Path, arguments: Mapping[str, Any], workdir: Path, timeout_s: float = SCRIPT_TIMEOUT_S
) -> dict[str, Any]:
    """Run a driver script with Spark's loopback environment; the JSON object of its last output line.

    See :mod:`tests.support.scripts` for how arguments and results travel.
    """
    return run_script(script, arguments, env=spark_environment(workdir), cwd=workdir, timeout_s=timeout_s)
