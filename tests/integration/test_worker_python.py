"""Spark's Python workers on an interpreter that cannot import the sink: a coded error saying so.

The workers run ``PYSPARK_PYTHON``; here a wrapper that starts this virtual environment's
Python without its ``site`` set-up (``-S``) and with only its ``site-packages`` on the
path: pyspark and pyarrow import, the sink (an editable install, or this checkout on
``PYTHONPATH``) does not, as on a system Python next to a virtual environment. One
driver subprocess (the test session's Spark has its workers already).
"""

from __future__ import annotations

import os
import stat
import sys
import sysconfig
from pathlib import Path

from tests.support.scripts import run_script

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "tests" / "support" / "worker_python_job.py"


def test_workers_that_cannot_import_the_sink_fail_the_batch_naming_pyspark_python(tmp_path: Path) -> None:
    wrapper = tmp_path / "python-without-icesink"
    site_packages = sysconfig.get_paths()["purelib"]
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={site_packages} exec {sys.executable} -S "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": str(wrapper),
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    result = run_script(JOB, {"warehouse": str(tmp_path / "warehouse")}, env=env, cwd=tmp_path)

    assert result["error"] == "WorkerPythonError", result  # icesink.WorkerPythonError
    message = result["message"]
    expected = "ICESINK-WORKER-PYTHON: Spark's Python workers cannot import 'icesink'"
    assert message.startswith(expected), message
    assert f"PYSPARK_PYTHON={wrapper}" in message  # the workers' interpreter
    assert f"the driver runs {sys.executable}" in message
    assert f"hint: start the job with PYSPARK_PYTHON={sys.executable}" in message
