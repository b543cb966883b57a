"""The sink's own state lives outside the table; each batch attempt's files under their own folder.

A table bucket (S3 Tables and the like) accepts only Iceberg's files in a table's
location: ``data/`` takes data files, ``metadata/`` only ``*.metadata.json``, ``*.avro``
and ``*.stats`` directly in it. The sink must write nothing else there, and a Spark task
retried after it wrote files must leave nothing behind once the batch commits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from icesink.errors import ConfigError
from tests.integration.test_crash_recovery import job_result
from tests.support.tables import catalog_from_options

ROOT = Path(__file__).resolve().parents[2]


def foreign_files(table_location: Path) -> list[str]:
    """Files in the table's location that a table bucket would refuse."""
    refused = []
    for path in table_location.rglob("*"):
        if path.is_dir():
            continue
        relative = path.relative_to(table_location)
        top = relative.parts[0]
        if top == "data" and path.suffix in (".parquet", ".avro"):
            continue
        if (
            top == "metadata"
            and len(relative.parts) == 2
            and path.name.endswith((".metadata.json", ".avro", ".stats"))
        ):
            continue
        refused.append(str(relative))
    return refused


@pytest.mark.parametrize("explicit", [False, True])
def test_staged_batches_and_attempt_records_stay_out_of_the_table(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path, tmp_path: Path, explicit: bool
) -> None:
    state = tmp_path / "state"
    options = {**catalog_options, "table": "db.tb", "sink-id": "tb", "commit.max-batches": "3"}
    if explicit:
        options["state-location"] = f"file://{state}"
    sink = IcebergSink.from_options(options)
    for batch_id in range(2):  # staged, not committed
        sink(spark.range(batch_id * 10, batch_id * 10 + 10).select("id", F.lit("x").alias("v")), batch_id)
    root = state if explicit else warehouse / "_icesink_state"
    assert sorted(p.name for p in (root / "db.tb" / "tb" / "staged").iterdir()) == [
        "000000000000.json",
        "000000000001.json",
    ]
    table_location = warehouse / "db" / "tb"
    assert foreign_files(table_location) == []
    sink.flush()
    table = catalog_from_options(options).load_table("db.tb")
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(20))
    assert foreign_files(table_location) == []
    assert list((root / "db.tb" / "tb" / "staged").iterdir()) == []  # cleaned up once committed
    # Every file of a batch attempt is under a folder of its own: data/<attempt prefix>/...
    folders = {
        Path(t.file.file_path).relative_to(f"file://{table_location}/data").parts[0]
        for t in table.scan().plan_files()
    }
    assert len(folders) == 2 and all(f.startswith("tb-b") for f in folders)


def test_state_location_is_required_off_a_local_warehouse(catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.tb", "catalog.warehouse": "s3://bucket/warehouse"}
    with pytest.raises(ConfigError, match="state-location"):
        IcebergSink.from_options(options)


def test_files_of_a_retried_task_are_deleted_once_the_batch_commits(
    catalog_options: dict[str, str], warehouse: Path
) -> None:
    import os
    import subprocess
    import sys

    options = {
        **catalog_options,
        "table": "db.retried",
        "sink-id": "retried",
        "partition-by": "bucket(4, id)",
    }
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.task_retry_job", "--options", json.dumps(options)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    discarded = job_result(done)["discarded"]
    assert discarded and all("-00000-0-" in p for p in discarded)  # attempt 0 of task 0's files

    table = catalog_from_options(options).load_table("db.retried")
    referenced = {t.file.file_path for t in table.scan().plan_files()}
    on_disk = {f"file://{p}" for p in (warehouse / "db" / "retried" / "data").rglob("*.parquet")}
    assert on_disk == referenced
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(4000))
