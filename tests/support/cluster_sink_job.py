"""A streaming driver that writes through the sink (on a standalone cluster or local), run as a script.

Reads its arguments as JSON from standard input: ``master``, ``input`` (a folder of Parquet
files, ``files_per_trigger`` per micro-batch, default 1), ``checkpoint``, ``options`` (the
sink's options; a list of them runs one query per sink, each reading the whole input and
checkpointing in ``checkpoint``/its number), ``ui_port`` (the driver's UI, whose REST API is
read at the end), and optionally ``log_file`` (Python logging at DEBUG goes there) and
``metrics_file`` (the ``/metrics`` text of the sinks' registries is written there at the
end). Prints one JSON line: the sinks' counters (summed), the number of failed task attempts
Spark saw, the application's and the session's Spark settings, and the UI's jobs, SQL
executions and environment as text.
"""

from __future__ import annotations

import json
import logging
import sys
import urllib.request
from typing import Any

from prometheus_client import generate_latest

from icesink import IcebergSink
from icesink.jobs.spark import get_spark

COUNTERS = (
    "icesink_rows_written_total",
    "icesink_commits_total",
    "icesink_orphan_files_total",
    "icesink_replays_skipped_total",
)


def _ui_json(base_url: str, path: str) -> Any:
    with urllib.request.urlopen(f"{base_url}/api/v1/{path}", timeout=30) as response:
        return json.loads(response.read().decode())


def _counters(sinks: list[IcebergSink]) -> dict[str, float]:
    samples = [s for sink in sinks for m in sink.metrics.registry.collect() for s in m.samples]
    return {name: sum(s.value for s in samples if s.name == name) for name in COUNTERS}


def _start_query(spark: Any, arguments: dict[str, Any], sink: IcebergSink, checkpoint: str) -> Any:
    schema = spark.read.parquet(arguments["input"]).schema
    return (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", int(arguments.get("files_per_trigger", 1)))
        .parquet(arguments["input"])
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    if arguments.get("log_file"):
        logging.basicConfig(filename=arguments["log_file"], level=logging.DEBUG, force=True)
    spark = get_spark(
        "icesink-cluster-sink",
        master=arguments["master"],
        conf={
            "spark.executor.memory": "768m",
            "spark.executor.cores": "1",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "true",
            "spark.ui.port": str(arguments["ui_port"]),
            "spark.task.maxFailures": "8",
        },
    )
    try:
        options, checkpoint = arguments["options"], arguments["checkpoint"]
        many = isinstance(options, list)
        sinks = [IcebergSink.from_options(each) for each in (options if many else [options])]
        queries = [
            _start_query(spark, arguments, sink, f"{checkpoint}/{n}" if many else checkpoint)
            for n, sink in enumerate(sinks)
        ]
        for query in queries:
            query.awaitTermination()
        ui = f"http://127.0.0.1:{arguments['ui_port']}"
        app_id = spark.sparkContext.applicationId
        stages = _ui_json(ui, f"applications/{app_id}/stages?status=complete")
        stages += _ui_json(ui, f"applications/{app_id}/stages?status=failed")
        jobs = _ui_json(ui, f"applications/{app_id}/jobs")
        sql = _ui_json(ui, f"applications/{app_id}/sql?details=true&planDescription=true")
        environment = _ui_json(ui, f"applications/{app_id}/environment")
        if arguments.get("metrics_file"):
            with open(arguments["metrics_file"], "wb") as out:
                for sink in sinks:
                    out.write(generate_latest(sink.metrics.registry))
        return {
            "counters": _counters(sinks),
            "failed_tasks": sum(int(s.get("numFailedTasks", 0)) for s in stages),
            "spark_conf": sorted(spark.sparkContext.getConf().getAll()),
            "session_conf": sorted(spark.conf.getAll.items()),
            "ui_text": json.dumps([jobs, sql, environment, stages]),
        }
    finally:
        spark.stop()


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
