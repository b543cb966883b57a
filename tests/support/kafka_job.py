"""The Kafka-to-Iceberg job as a subprocess: started from a YAML file, watched through its checkpoint."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 900


def start_job(config_file: Path, log: Path, *flags: str) -> subprocess.Popen[bytes]:
    """The job's command (``python -m streaming_jobs.kafka.job``, what ``icesink-kafka-to-iceberg``
    runs), in its own process group (so a kill takes the JVM too)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "streaming_jobs.kafka.job", "--config", str(config_file), *flags],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def started_batches(checkpoint: Path) -> int:
    """How many micro-batches the query of ``checkpoint`` has started in its lifetime (its offset log)."""
    offsets_log = checkpoint / "offsets"
    return len([p for p in offsets_log.glob("*") if p.name.isdigit()]) if offsets_log.exists() else 0


def wait_for_batches(job: subprocess.Popen[bytes], offsets_log: Path, count: int, log: Path) -> None:
    """Wait until the query has started ``count`` micro-batches in its lifetime (its offset log)."""
    deadline = time.monotonic() + JOB_TIMEOUT_S
    while time.monotonic() < deadline:
        if started_batches(offsets_log.parent) >= count:
            return
        if job.poll() is not None:
            raise AssertionError(f"the job ended (code {job.returncode}) early:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)
    raise AssertionError(f"the job did not reach micro-batch {count - 1}:\n{log.read_text()[-4000:]}")
