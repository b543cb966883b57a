"""The sink on a standalone cluster, warehouse and state on S3: an executor SIGKILLed mid-batch.

The driver runs as a subprocess on ``spark://`` with two 1-core Workers; the table lives in a
SQL catalog (SQLite) whose warehouse is SeaweedFS's ``warehouse`` bucket, and the sink's state
is on S3 too, so executors share nothing with the driver but the object store. The test
watches the table's data prefix and kills one executor as soon as the first file of the
second batch appears, while that batch's write tasks run. Spark retries the lost tasks;
the table must hold every row exactly once and the data prefix nothing the table does not
reference (the killed attempts' files are deleted once the batch commits).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import FileSelector, FileType
from pyiceberg.catalog import load_catalog

from tests.support.processes import free_port, wait_until
from tests.support.scripts import script_result, start_script
from tests.support.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS
from tests.support.spark_cluster import SparkCluster
from tests.support.spark_process import spark_environment

pytestmark = pytest.mark.deploy

JOB = Path(__file__).resolve().parents[1] / "support" / "cluster_sink_job.py"
BATCHES = 3
ROWS_PER_BATCH = 200_000
BUCKETS = 4
FILES_PER_BATCH = 4
"""Input files of one micro-batch: as many Spark partitions (one would be written by one task)."""
TABLE = "cluster.events"
FIRST_FILE_TIMEOUT_S = 240.0
JOB_TIMEOUT_S = 600.0


def write_input(folder: Path) -> list[int]:
    """Parquet files of distinct ids, ``FILES_PER_BATCH`` per micro-batch; a batch takes seconds to write."""
    folder.mkdir()
    rows_per_file = ROWS_PER_BATCH // FILES_PER_BATCH
    for number in range(BATCHES * FILES_PER_BATCH):
        ids = list(range(number * rows_per_file, (number + 1) * rows_per_file))
        payload = [f"row-{i:09d}-" + "x" * (i % 50) for i in ids]
        pq.write_table(pa.table({"id": ids, "payload": payload}), folder / f"part-{number:03d}.parquet")
        # The file source takes files in modification-time order.
        os.utime(folder / f"part-{number:03d}.parquet", (number, number))
    return list(range(BATCHES * FILES_PER_BATCH * rows_per_file))


def sink_options(seaweedfs: SeaweedFS, catalog_db: Path, prefix: str) -> dict[str, str]:
    catalog = seaweedfs.sql_catalog_properties(f"sqlite:///{catalog_db}", f"{prefix}/warehouse")
    return {
        "table": TABLE,
        "partition-by": f"bucket({BUCKETS}, id)",
        "state-location": f"s3://{WAREHOUSE_BUCKET}/{prefix}/state",
        "write.target-file-size-bytes": str(256 * 1024),
        "catalog.name": "cluster",
        **{f"catalog.{key}": value for key, value in catalog.items()},
    }


def objects_under(seaweedfs: SeaweedFS, prefix: str) -> list[str]:
    infos = seaweedfs.filesystem().get_file_info(FileSelector(prefix, recursive=True, allow_not_found=True))
    return sorted(info.path for info in infos if info.type == FileType.File)


def driver_running(driver: subprocess.Popen[str]) -> bool:
    if driver.poll() is not None:
        raise AssertionError(f"the driver exited with {driver.returncode} before the kill")
    return True


def test_an_executor_killed_mid_batch_leaves_every_row_once_and_no_stray_file(
    seaweedfs: SeaweedFS, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    expected_ids = write_input(tmp_path / "input")
    prefix = f"cluster-sink-{uuid.uuid4().hex[:8]}"
    options = sink_options(seaweedfs, tmp_path / "catalog.db", prefix)
    data_prefix = f"{WAREHOUSE_BUCKET}/{prefix}/warehouse/cluster/events/data"
    arguments: dict[str, Any] = {
        "master": spark_cluster.master_url,
        "input": str(tmp_path / "input"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "options": options,
        "ui_port": free_port(),
        "files_per_trigger": FILES_PER_BATCH,
    }
    driver = start_script(JOB, arguments, env=spark_environment(tmp_path), cwd=tmp_path)
    try:
        wait_until(
            lambda: (
                driver_running(driver) and any("-b1-" in p for p in objects_under(seaweedfs, data_prefix))
            ),
            FIRST_FILE_TIMEOUT_S,
            "the first data file of batch 1",
            interval_s=0.05,
        )
        killed = spark_cluster.kill_executor()
    except BaseException as e:
        driver.kill()
        raise AssertionError(f"{e}\ndriver output:\n{driver.communicate()[1][-6000:]}") from e
    result = script_result(driver, timeout_s=JOB_TIMEOUT_S)

    assert killed not in spark_cluster.executor_pids()
    assert result["failed_tasks"] >= 1, "the kill landed after the batch's tasks had finished"
    catalog = load_catalog(
        "cluster",
        **seaweedfs.sql_catalog_properties(f"sqlite:///{tmp_path / 'catalog.db'}", f"{prefix}/warehouse"),
    )
    table = catalog.load_table(TABLE)
    ids = table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
    assert sorted(ids) == expected_ids
    assert result["counters"]["icesink_commits_total"] == BATCHES
    referenced = {task.file.file_path.removeprefix("s3://") for task in table.scan().plan_files()}
    assert objects_under(seaweedfs, data_prefix) == sorted(referenced)
    assert objects_under(seaweedfs, f"{WAREHOUSE_BUCKET}/{prefix}/state") == []
