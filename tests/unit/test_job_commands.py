"""The jobs' commands: every console script of pyproject.toml names a function that exists, and
``python -m icesink.jobs.kafka.job`` is the Kafka job's command line."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_console_script_names_a_function() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "icesink-kafka-to-iceberg" in scripts
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function, None)), (name, target)


def test_the_kafka_job_runs_as_a_module_and_fails_on_bad_flags_before_spark() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "icesink.jobs.kafka.job", "--set", "no-value"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "icesink-kafka-to-iceberg: ICESINK-CONFIG: --set 'no-value' is not KEY=VALUE" in done.stderr
