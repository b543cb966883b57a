"""A Spark Connect server on loopback: a streaming query's foreachBatch runs on the server."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkRuntimeError
from pyspark.sql import SparkSession

from tests.support.spark_connect import SparkConnectServer
from tests.support.spark_process import run_driver

pytestmark = pytest.mark.deploy

JOB = Path(__file__).resolve().parents[1] / "support" / "connect_stream_job.py"
FILES = 3
ROWS_PER_FILE = 20


def test_foreach_batch_writes_parquet_through_connect(
    spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    source = tmp_path / "input"
    source.mkdir()
    expected = []
    for f in range(FILES):
        lines = [{"id": f * ROWS_PER_FILE + i, "name": f"n{f}-{i}"} for i in range(ROWS_PER_FILE)]
        (source / f"part-{f}.json").write_text("\n".join(json.dumps(line) for line in lines))
        expected += lines
    output = tmp_path / "output"

    result = run_driver(
        JOB,
        {
            "remote": spark_connect.remote,
            "input": str(source),
            "output": str(output),
            "checkpoint": str(tmp_path / "cp"),
        },
        tmp_path / "client",
    )

    assert result["error"] is None
    assert result["client_session"] == "pyspark.sql.connect.session"
    markers = [json.loads(p.read_text()) for p in sorted(output.glob("batch=*.json"))]
    assert markers, "foreachBatch never ran"
    for marker in markers:
        assert marker["session"] == "pyspark.sql.connect.session"  # the function ran with a Connect session
        assert marker["server_pid"] != result["client_pid"]  # ... in a process of the server
    files = [path for marker in markers for path in marker["files"]]
    assert sorted(str(p) for p in output.glob("batch=*/*.parquet")) == sorted(files)
    rows = [row for path in files for row in pq.read_table(path).to_pylist()]
    assert sorted(rows, key=lambda r: r["id"]) == expected


def test_a_connect_client_cannot_share_the_process_of_the_local_session(
    spark: SparkSession, spark_connect: SparkConnectServer
) -> None:
    with pytest.raises(PySparkRuntimeError, match="SESSION_ALREADY_EXIST"):
        SparkSession.builder.remote(spark_connect.remote).getOrCreate()
    assert spark.range(3).count() == 3  # the local session is unharmed
