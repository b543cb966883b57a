"""Client of the Spark Connect smoke test, run as a script: a streaming foreachBatch that writes Parquet.

Reads its arguments as JSON from standard input (``remote``, ``input`` folder of JSON
lines, ``output`` folder, ``checkpoint``), runs the query to the end of its input
(``availableNow``), and prints one JSON line with the client's process id and the Spark
session class the client used. The ``foreachBatch`` function is a plain picklable object:
it runs on the server, in a Python process of its own, and writes one Parquet file per
task through ``mapInArrow`` under ``output/batch=<id>/``. Self-contained on purpose:
``__main__``'s classes are pickled by value, so the server needs nothing from this
repository.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

INPUT_SCHEMA = "id long, name string"
RESULT_SCHEMA = "path string, rows long"


@dataclass(frozen=True)
class WriteTaskParquet:
    """The ``mapInArrow`` function: the task's rows in one Parquet file under ``folder``."""

    folder: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches))
        if table.num_rows == 0:
            return
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        path = f"{self.folder}/part-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, path)
        yield pa.RecordBatch.from_pydict({"path": [path], "rows": [table.num_rows]})


@dataclass(frozen=True)
class WriteBatches:
    """The ``foreachBatch`` function: no Spark objects, nothing from the client process."""

    output: str

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        folder = f"{self.output}/batch={batch_id}"
        written = batch_df.mapInArrow(WriteTaskParquet(folder), RESULT_SCHEMA).collect()
        marker = {
            "batch_id": batch_id,
            "session": type(batch_df.sparkSession).__module__,
            "server_pid": os.getpid(),
            "files": [row["path"] for row in written],
        }
        Path(f"{folder}.json").write_text(json.dumps(marker))


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    spark = SparkSession.builder.remote(arguments["remote"]).getOrCreate()
    try:
        query = (
            spark.readStream.schema(INPUT_SCHEMA)
            .json(arguments["input"])
            .writeStream.foreachBatch(WriteBatches(arguments["output"]))
            .option("checkpointLocation", arguments["checkpoint"])
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        exception = query.exception()
    finally:
        spark.stop()
    return {
        "client_pid": os.getpid(),
        "client_session": type(spark).__module__,
        "error": None if exception is None else str(exception),
    }


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
