"""One run of the Kafka job in a process of its own, for ``benchmarks/kafka_connect.py``.

``python -m benchmarks._kafka_job_process CONFIG_JSON`` validates the job's configuration (the
mapping of its YAML file, as JSON), runs it as ``python -m icesink.jobs.kafka.job`` would (a
SparkSession of the job's settings, :func:`icesink.jobs.kafka.job.main.session_conf`, the query
until ``availableNow`` has read everything), then, before the session stops, prints one line of
JSON: the exit code, the CPU seconds of the process tree so far (this process, its JVM, Spark's
Python workers: :func:`benchmarks._process_cpu.tree_cpu_seconds`), which is everything the run
cost from the interpreter's start, and the JVM's CPU by thread kind
(:func:`benchmarks._process_cpu.jvm_thread_cpu_seconds`: JIT compilers, garbage collection,
Spark's task threads, the rest).
"""

from __future__ import annotations

import json
import sys

from benchmarks._process_cpu import job_cpu_seconds, jvm_thread_cpu_seconds, tree_cpu_seconds

RESULT_PREFIX = "kafka-job-result "
"""Starts the line holding the result, among whatever else the job prints."""


def main(argv: list[str]) -> int:
    from icesink.jobs.kafka.job.main import run, session_conf
    from icesink.jobs.kafka.job.validate import validate
    from icesink.jobs.spark import get_spark

    config = validate(json.loads(argv[0]))
    spark = get_spark(config.spark.app_name, config.spark.master, session_conf(config))
    try:
        code = run(config, spark)
        cpu = tree_cpu_seconds()
        jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
        result = {"code": code, "cpu_seconds": job_cpu_seconds(cpu), "cpu": cpu}
        result["jvm_threads"] = jvm_thread_cpu_seconds(int(jvm))
        print(RESULT_PREFIX + json.dumps(result), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
