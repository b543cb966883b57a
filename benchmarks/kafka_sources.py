"""Spark's own Kafka source against icesink's Python source: same broker, same messages, same run.

Starts an Apache Kafka broker (KRaft, :mod:`tests.support.kafka_broker`; its jars and Spark's
Kafka source are what ``make env`` fetched), produces ``--messages`` JSON messages of about
1 KB (:func:`benchmarks.kafka_throughput.message`) over ``--partitions`` partitions, and runs
the Kafka-to-Iceberg job on them (``availableNow``, schema inferred per batch, each run into
the table its source's warm-up run made) with ``kafka.source: jvm`` (``format("kafka")``, the
values decoded by the job's own pass) and ``kafka.source: python`` (``icesink-kafka-decoded``
with the job's defaults: decoded, and where the table allows written, in the source's
tasks), taking turns, ``--runs`` rounds in one Spark session. Reported per source: messages
per second from the query's start to its end, and messages per CPU second of the job (the
driver, the Spark JVM, the Python workers; not the broker, whose CPU is shown apart).

    .venv/bin/python -m benchmarks.kafka_sources --messages 200000 --runs 3

The last line is the result as JSON.

The figures: benchmarks/README.md, "Spark's Kafka source against the Python source".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.kafka_throughput import TOPIC, BatchTimes, job_config, produce

SOURCES = ("jvm", "python")


def cpu_seconds(broker_pid: int) -> dict[str, float]:
    """CPU seconds so far of this process (the driver), its other children (the Spark JVM and
    Python workers, reaped ones too) and the broker process."""
    import psutil

    me = psutil.Process()
    own = me.cpu_times()
    totals = {"job": own.user + own.system, "broker": 0.0}
    for process in me.children(recursive=True):
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        kind = "broker" if process.pid == broker_pid else "job"
        totals[kind] += times.user + times.system + times.children_user + times.children_system
    return totals


def run_source(
    spark: Any, broker: Any, root: Path, source: str, run: int, max_offsets: int | None
) -> dict[str, Any]:
    """One run of the job reading with ``source``; its seconds, CPU seconds and rows written."""
    from icesink.jobs.kafka.job.main import run as run_job
    from icesink.metrics import SinkMetrics

    name = f"{source}_{run}" if run >= 0 else f"warmup_{source}_{-run}"
    table = f"bench.events_{source}"
    config = job_config(
        broker, root, name, {"topics": [TOPIC]}, {"table": table}, max_offsets, {"source": source}
    )
    metrics = SinkMetrics()
    before = cpu_seconds(broker.pid)
    started = time.perf_counter()
    code = run_job(config, spark, metrics)
    seconds = time.perf_counter() - started
    after = cpu_seconds(broker.pid)
    if code != 0:
        raise RuntimeError(f"the job reading with the {source} source failed (exit code {code})")
    rows = sum(
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == "icesink_rows_written_total" and sample.labels.get("table") == table
    )
    return {
        "source": source,
        "seconds": seconds,
        "cpu_seconds": after["job"] - before["job"],
        "broker_cpu_seconds": after["broker"] - before["broker"],
        "rows": int(rows),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup-runs", type=int, default=1, help="per source, first, not counted")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0, help="0: one micro-batch per run")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="3g")
    return parser.parse_args(argv)


def measured_runs(spark: Any, broker: Any, root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The warm-up runs, then ``args.runs`` rounds of every source taking turns; the counted runs."""
    max_offsets = args.max_offsets_per_trigger or None
    for warmup in range(args.warmup_runs):
        for source in SOURCES:
            result = run_source(spark, broker, root, source, -1 - warmup, max_offsets)
            print(f"warm-up ({source}): {args.messages / result['seconds']:,.0f} messages/s", flush=True)
    results = []
    for run in range(args.runs):
        for source in SOURCES:
            load = os.getloadavg()[0]
            result = run_source(spark, broker, root, source, run, max_offsets)
            if result["rows"] != args.messages:
                raise RuntimeError(
                    f"{source} run {run + 1} wrote {result['rows']:,} rows, not {args.messages:,}"
                )
            result.update(
                load_average=load,
                messages_per_s=args.messages / result["seconds"],
                messages_per_cpu_s=args.messages / result["cpu_seconds"],
            )
            results.append(result)
            print(
                f"run {run + 1} ({source}): {result['seconds']:.1f} s = {result['messages_per_s']:,.0f} "
                f"messages/s; {result['cpu_seconds']:.1f} CPU s = {result['messages_per_cpu_s']:,.0f} "
                f"messages per CPU second (broker {result['broker_cpu_seconds']:.1f} CPU s; "
                f"load average {load:.1f})",
                flush=True,
            )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Each source's median messages per second and per CPU second."""
    return {
        source: {
            "median_messages_per_s": round(
                statistics.median(r["messages_per_s"] for r in results if r["source"] == source)
            ),
            "median_messages_per_cpu_s": round(
                statistics.median(r["messages_per_cpu_s"] for r in results if r["source"] == source)
            ),
        }
        for source in SOURCES
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from icesink.jobs.jvm_jars import with_spark_kafka_jars
    from icesink.jobs.spark import get_spark
    from tests.support.kafka_broker import KafkaBroker

    root = Path(tempfile.mkdtemp(prefix="icesink-kafka-sources-"))
    (root / "warehouse").mkdir()
    broker = KafkaBroker(root / "kafka")
    (root / "kafka").mkdir()
    broker.start()
    try:
        print(f"Apache Kafka ready in {broker.start_seconds:.1f} s", flush=True)
        produce_s = produce(broker, args.messages, args.partitions)  # type: ignore[arg-type]
        print(f"produced {args.messages:,} messages of ~1 KB in {produce_s:.1f} s", flush=True)
        conf = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
        spark = get_spark("icesink-kafka-sources", args.master, with_spark_kafka_jars(conf))
        spark.sparkContext.setLogLevel("ERROR")
        BatchTimes().listen(spark)  # as in benchmarks.kafka_throughput: the same listeners run
        results = measured_runs(spark, broker, root, args)
        spark.stop()
    finally:
        broker.stop()
    summary = summarize(results)
    for source, figures in summary.items():
        print(
            f"median ({source}): {figures['median_messages_per_s']:,} messages/s, "
            f"{figures['median_messages_per_cpu_s']:,} messages per CPU second on {args.master}"
        )
    report = {"benchmark": "kafka_sources", "messages": args.messages, "partitions": args.partitions}
    print(json.dumps({**report, "master": args.master, "sources": summary, "runs": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
