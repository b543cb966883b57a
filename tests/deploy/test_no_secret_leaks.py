"""No credential given to the sink shows up where operators look: logs, errors, metrics, the Spark UI.

One driver subprocess streams two batches through two sinks with S3 keys: one on a REST
catalog with a ``credential``, one on a SQL catalog whose PostgreSQL URI holds a password.
Everything it leaves to be read is collected: Python logging at DEBUG, the driver's standard
output and error (Spark's own log), the sinks' ``/metrics`` text, the application's and the
session's Spark settings, and what the driver's UI serves (jobs and their descriptions, SQL
executions with their plans, the environment). Each secret is searched for in all of it. A
catalog that refuses a wrong password must not quote it in the error either.
"""

from __future__ import annotations

import json
import logging
import traceback
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesink import IcebergSink
from icesink.errors import CatalogError
from tests.support.postgres import PostgresServer
from tests.support.processes import free_port
from tests.support.scripts import start_script
from tests.support.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS
from tests.support.spark_process import spark_environment

pytestmark = pytest.mark.deploy

JOB = Path(__file__).resolve().parents[1] / "support" / "cluster_sink_job.py"
ROWS_PER_FILE = 1000
FILES = 2


def write_input(folder: Path) -> None:
    folder.mkdir()
    for number in range(FILES):
        ids = list(range(number * ROWS_PER_FILE, (number + 1) * ROWS_PER_FILE))
        pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), folder / f"{number}.parquet")


def rest_options(seaweedfs: SeaweedFS, prefix: str) -> dict[str, str]:
    catalog = seaweedfs.rest_catalog_properties()
    return {
        "table": f"ns_{prefix.replace('-', '_')}.events",
        "catalog.name": "rest",
        **{f"catalog.{key}": value for key, value in catalog.items()},
    }


def postgres_options(seaweedfs: SeaweedFS, postgres: PostgresServer, prefix: str) -> dict[str, str]:
    catalog = seaweedfs.sql_catalog_properties(postgres.sqlalchemy_uri(), f"{prefix}/warehouse")
    return {
        "table": f"ns_{prefix.replace('-', '_')}.events",
        "catalog.name": f"pg_{prefix.replace('-', '_')}",
        **{f"catalog.{key}": value for key, value in catalog.items()},
    }


@pytest.fixture(scope="module")
def leftovers(
    seaweedfs: SeaweedFS, postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """Run the driver with both sinks; everything it left to be read, as one text."""
    tmp_path = tmp_path_factory.mktemp("leaks")
    prefix = f"leak-{uuid.uuid4().hex[:6]}"
    state = {"state-location": f"s3://{WAREHOUSE_BUCKET}/{prefix}/state"}
    sinks = [rest_options(seaweedfs, prefix) | state, postgres_options(seaweedfs, postgres, prefix) | state]
    write_input(tmp_path / "input")
    arguments: dict[str, Any] = {
        "master": "local[2]",
        "input": str(tmp_path / "input"),
        "checkpoint": str(tmp_path / "checkpoint"),
        "options": sinks,
        "ui_port": free_port(),
        "log_file": str(tmp_path / "driver.log"),
        "metrics_file": str(tmp_path / "metrics.txt"),
    }
    driver = start_script(JOB, arguments, env=spark_environment(tmp_path), cwd=tmp_path)
    stdout, stderr = driver.communicate(timeout=600)
    assert driver.returncode == 0, stderr[-6000:]
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["counters"]["icesink_rows_written_total"] == len(sinks) * FILES * ROWS_PER_FILE
    logs = (tmp_path / "driver.log").read_text()
    assert "batch 1" in logs  # DEBUG logging reached the file
    spark_logs = "\n".join(p.read_text(errors="replace") for p in (tmp_path / "logs").glob("*"))
    return "\n".join(
        [logs, stdout, stderr, spark_logs, (tmp_path / "metrics.txt").read_text(), json.dumps(result)]
    )


def assert_no_secret(text: str, secrets: dict[str, str]) -> None:
    leaked = [name for name, secret in secrets.items() if secret in text]
    assert not leaked, f"secrets found: {leaked}"


def test_rest_catalog_credential_and_s3_keys_stay_secret(leftovers: str, seaweedfs: SeaweedFS) -> None:
    assert_no_secret(
        leftovers,
        {
            "credential": seaweedfs.rest_catalog_properties()["credential"],
            "s3.secret-access-key": seaweedfs.secret_key,
            "s3.access-key-id": seaweedfs.access_key,
        },
    )


def test_a_password_in_a_catalog_uri_stays_secret(
    leftovers: str, seaweedfs: SeaweedFS, postgres: PostgresServer
) -> None:
    assert_no_secret(
        leftovers, {"postgres password": postgres.password, "s3.secret-access-key": seaweedfs.secret_key}
    )


def test_a_refused_password_is_not_quoted_in_the_error(
    seaweedfs: SeaweedFS, postgres: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    options = postgres_options(seaweedfs, postgres, "refused") | {
        "catalog.uri": postgres.sqlalchemy_uri().replace(postgres.password, wrong),
        "state-location": f"s3://{WAREHOUSE_BUCKET}/refused/state",
    }
    caplog.set_level(logging.DEBUG)

    with pytest.raises(CatalogError) as failure:
        IcebergSink.from_options(options)

    shown = "".join(traceback.format_exception(failure.value)) + caplog.text
    assert "CATALOG" in shown
    assert_no_secret(shown, {"refused password": wrong, "s3.secret-access-key": seaweedfs.secret_key})
