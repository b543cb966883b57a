"""A Spark Connect client whose streaming query's ``foreachBatch`` is the sink, run as a script.

Reads its arguments as JSON from standard input (``remote``, ``input`` folder of JSON
lines, ``checkpoint``, ``options``: the sink's options), runs the query to the end of its
input (``availableNow``, one file per batch) and prints one JSON line with the query's
error (``None`` when it succeeded). The sink is pickled here and unpickled in a Python
process of the server, where it opens its catalog and writes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

from icesink import IcebergSink

INPUT_SCHEMA = "id long, name string, region string"


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    spark = SparkSession.builder.remote(arguments["remote"]).getOrCreate()
    sink = IcebergSink.from_options(arguments["options"])
    try:
        query = (
            spark.readStream.schema(INPUT_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(arguments["input"])
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", arguments["checkpoint"])
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination()
            error = None
        except StreamingQueryException as failed:  # the query failed in the server
            error = str(failed)
    finally:
        spark.stop()
    return {"error": error}


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
