"""Driver of the cluster smoke test, run as a script: executors write Parquet to S3, the driver reads it back.

Reads its arguments as JSON from standard input (``master``, ``s3`` settings, ``prefix``
under the ``warehouse`` bucket, ``rows``, ``partitions``, optionally ``hold``), and prints one JSON line: the
files the tasks wrote (path, rows, writer's process id), the driver's process id, and the
rows read back. Self-contained on purpose: the tasks' code is pickled by value from
``__main__``, so the executors need nothing from this repository.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql import SparkSession

RESULT_SCHEMA = "path string, rows long, pid long"
HOLD_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class S3Target:
    """Where the tasks write: a plain S3 bucket on an endpoint of the test's SeaweedFS."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str
    prefix: str

    def filesystem(self) -> pafs.S3FileSystem:
        return pafs.S3FileSystem(
            access_key=self.access_key,
            secret_key=self.secret_key,
            region=self.region,
            endpoint_override=self.endpoint,
            scheme="http",
        )


@dataclass(frozen=True)
class WriteParquet:
    """The ``mapInArrow`` function: one Parquet file per task, on S3, opened lazily in the task.

    With ``hold``, a local folder, each task first announces itself there
    (``started-<id>``) and waits for ``<hold>/release``: a test can kill an executor while
    tasks run.
    """

    target: S3Target
    hold: str | None = None

    def _wait_for_release(self) -> None:
        if self.hold is None:
            return
        Path(self.hold, f"started-{uuid.uuid4().hex}").touch()
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        while not Path(self.hold, "release").exists() and time.monotonic() < deadline:
            time.sleep(0.1)

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        self._wait_for_release()
        path = f"{self.target.prefix}/part-{uuid.uuid4().hex}.parquet"
        rows = 0
        writer: pq.ParquetWriter | None = None
        with self.target.filesystem().open_output_stream(path) as out:
            for batch in batches:
                if writer is None:
                    writer = pq.ParquetWriter(out, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
            if writer is not None:
                writer.close()
        if rows:
            yield pa.RecordBatch.from_pydict(
                {"path": [path], "rows": [rows], "pid": [os.getpid()]},
                schema=pa.schema([("path", pa.string()), ("rows", pa.int64()), ("pid", pa.int64())]),
            )


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    s3 = arguments["s3"]
    target = S3Target(s3["endpoint"], s3["access_key"], s3["secret_key"], s3["region"], arguments["prefix"])
    spark = (
        SparkSession.builder.master(arguments["master"])
        .appName("icesink-cluster-smoke")
        .config("spark.executor.memory", arguments.get("executor_memory", "768m"))
        .config("spark.executor.cores", "1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        executors = spark.sparkContext.getConf().get("spark.master")
        numbers = spark.range(0, int(arguments["rows"]), numPartitions=int(arguments["partitions"]))
        writer = WriteParquet(target, arguments.get("hold"))
        written = numbers.mapInArrow(writer, RESULT_SCHEMA).collect()
    finally:
        spark.stop()
    files = [{"path": r["path"], "rows": r["rows"], "pid": r["pid"]} for r in written]
    back = pq.read_table([f["path"] for f in files], filesystem=target.filesystem()) if files else None
    ids = sorted(back.column("id").to_pylist()) if back is not None else []
    return {"master": executors, "driver_pid": os.getpid(), "files": files, "ids": ids}


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
