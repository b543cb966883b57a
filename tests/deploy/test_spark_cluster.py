"""A Spark standalone cluster on loopback: executors write to SeaweedFS's S3, one can be killed mid-job.

These check the cluster the tests start, not the sink: ``make test-deploy`` runs them. ``make
test`` leaves them to ``test_cluster_sink.py``, which runs the sink on that cluster and kills an
executor mid-batch; when it fails, these tell the cluster's fault from the sink's.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FileSelector

from tests.support.processes import wait_until
from tests.support.scripts import script_result, start_script
from tests.support.seaweedfs import REGION, WAREHOUSE_BUCKET, SeaweedFS
from tests.support.spark_cluster import SparkCluster
from tests.support.spark_process import run_driver, spark_environment

pytestmark = [pytest.mark.deploy, pytest.mark.cluster_full]

JOB = Path(__file__).resolve().parents[1] / "support" / "cluster_parquet_job.py"
ROWS = 4000
PARTITIONS = 4
EXECUTORS_TIMEOUT_S = 180.0


def job_arguments(seaweedfs: SeaweedFS, cluster: SparkCluster, **more: Any) -> dict[str, Any]:
    return {
        "master": cluster.master_url,
        "s3": {
            "endpoint": seaweedfs.s3_endpoint,
            "access_key": seaweedfs.access_key,
            "secret_key": seaweedfs.secret_key,
            "region": REGION,
        },
        "prefix": f"{WAREHOUSE_BUCKET}/cluster-{uuid.uuid4().hex[:8]}",
        "rows": ROWS,
        "partitions": PARTITIONS,
        **more,
    }


def assert_written_once(seaweedfs: SeaweedFS, result: dict[str, Any]) -> None:
    assert result["ids"] == list(range(ROWS))
    filesystem = seaweedfs.filesystem()
    assert len(result["files"]) == PARTITIONS
    prefix = result["files"][0]["path"].rsplit("/", 1)[0]
    listed = filesystem.get_file_info(FileSelector(prefix, recursive=True))
    assert sorted(info.path for info in listed) == sorted(f["path"] for f in result["files"])
    for written in result["files"]:
        assert written["pid"] != result["driver_pid"]  # written by an executor's Python worker
        assert pq.read_metadata(written["path"], filesystem=filesystem).num_rows == written["rows"]


def test_executors_write_parquet_to_s3(
    seaweedfs: SeaweedFS, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    result = run_driver(JOB, job_arguments(seaweedfs, spark_cluster), tmp_path)

    assert result["master"] == spark_cluster.master_url
    assert spark_cluster.alive_workers() == 2
    assert_written_once(seaweedfs, result)


def test_the_job_completes_after_an_executor_is_killed(
    seaweedfs: SeaweedFS, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    hold = tmp_path / "hold"
    hold.mkdir()
    driver = start_script(
        JOB,
        job_arguments(seaweedfs, spark_cluster, hold=str(hold)),
        env=spark_environment(tmp_path),
        cwd=tmp_path,
    )
    try:
        wait_until(lambda: len(list(hold.glob("started-*"))) >= 2, EXECUTORS_TIMEOUT_S, "two tasks running")
        executors = spark_cluster.executor_pids()
        assert len(executors) == 2, executors
        killed = spark_cluster.kill_executor(executors[0])
    finally:
        (hold / "release").touch()
    result = script_result(driver)

    assert killed not in spark_cluster.executor_pids()
    assert_written_once(seaweedfs, result)
