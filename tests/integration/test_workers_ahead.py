"""A prepared sink starts Spark's Python workers, with the write task's imports, before the first batch."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from icesink.write.allocator import WRITE_POOL, executor_environment
from tests.support.spark_process import run_driver

JOB = Path(__file__).resolve().parents[1] / "support" / "workers_ahead_job.py"


def test_a_new_applications_workers_have_the_write_tasks_modules_once_the_sink_is_prepared(
    tmp_path: Path,
) -> None:
    result = run_driver(JOB, {"workdir": str(tmp_path)}, tmp_path)

    # The question itself imports none of them: a new worker has not.
    assert result["before"], result
    assert not any(row["icesink_write_task"] or row["pyiceberg_io_pyarrow"] for row in result["before"])
    assert result["after"], result
    assert all(row["icesink_write_task"] and row["pyiceberg_io_pyarrow"] for row in result["after"]), result
    # The jobs' session starts every worker with the write tasks' pool, before any task of the sink.
    expected = WRITE_POOL if executor_environment() else pa.default_memory_pool().backend_name
    assert {row["pool"] for row in result["before"] + result["after"]} == {expected}, result
