"""Driver of the worker-interpreter test, run as a script: one batch through the sink, whatever it raises.

Reads ``warehouse`` (a folder) from standard input as JSON, writes three rows to
``db.t`` of a SQLite catalog there, and prints one JSON line: the exception's class and
its first line (or ``null`` for both when the batch was written). ``PYSPARK_PYTHON`` in
its environment chooses the workers' interpreter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from icesink import IcebergSink


def main() -> None:
    warehouse = Path(json.loads(sys.stdin.read())["warehouse"])
    warehouse.mkdir(parents=True, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    options = {
        "table": "db.t",
        "sink-id": "worker-python",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{warehouse / 'catalog.db'}",
        "catalog.warehouse": f"file://{warehouse}",
    }
    result: dict[str, str | None] = {"error": None, "message": None}
    try:
        with IcebergSink.from_options(options) as sink:
            sink(spark.range(3).withColumnRenamed("id", "n"), 0)
    except Exception as e:
        result = {"error": type(e).__name__, "message": str(e).splitlines()[0]}
    finally:
        spark.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
