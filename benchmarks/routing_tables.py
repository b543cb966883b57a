"""Many tables against one: N topics routed to N tables, against one topic into one table.

Starts a Tansu broker, produces ``--topics`` topics (one partition each) of
``--messages-per-topic`` messages and one topic of ``--single-messages`` messages (4
partitions), all the 1 KB JSON events of :mod:`benchmarks.kafka_throughput`. Then, in
``--rounds`` rounds, runs the Kafka-to-Iceberg job (Python source, schema inferred per
batch, ``availableNow``, ``--max-offsets-per-trigger`` per micro-batch) alternately on
the one topic into one table and on the N topics (``subscribePattern``,
``route.by=topic``, ``route.table-template``) into N tables, each run into fresh tables.
With ``--contenders single,routed,unpacked`` a third run per round reads the N topics
with ``kafka.max-partitions`` set to N: one Spark task per topic-partition, as the source
did before it packed small offset ranges into a few tasks (``--unpacked-tasks`` sets
another count, such as 4: two tasks per core, the default before one per core).
``routed-sink`` is the routed job with ``kafka.write-in-source: false``: every row goes
through the sink's write tasks, as before the decoding tasks wrote the rows of the
tables seen before.

Reported per run: messages per second (from the query's start to its end), CPU
seconds, micro-batches, and Spark jobs per micro-batch; per round, the ratio routed /
single. Spark jobs are counted between two marker jobs run on the driver before and
after the query (job ids are sequential in a SparkContext), so every job of the run
is counted: source planning, decoding, the sink's jobs.

    .venv/bin/python -m benchmarks.routing_tables --topics 200 --messages-per-topic 5000 \\
        --single-messages 1000000 --rounds 3

The JVM starts once; a warm-up run on a tenth of the routed topics (not counted), in two
micro-batches (the sink's path, then the decoding tasks' writes), compiles and imports
the hot paths. Producing is not timed.
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

from benchmarks._kafka_messages import MESSAGE_BYTES, produce
from benchmarks._process_cpu import job_cpu_seconds
from benchmarks.kafka_throughput import job_config, timed_run
from tests.support.tansu import TansuBroker

SINGLE_TOPIC = "single-events"
ROUTED_PREFIX = "routed-"
SINGLE_PARTITIONS = 4
_MARKER_GROUP = "icesink-bench-marker"


def routed_topic(n: int) -> str:
    """The ``n``-th routed topic."""
    return f"{ROUTED_PREFIX}{n:03d}"


def produce_all(broker: TansuBroker, topics: int, per_topic: int, single: int) -> float:
    """Produce the routed topics and the single topic; seconds taken."""
    seconds = produce(broker, single, SINGLE_PARTITIONS, topic=SINGLE_TOPIC)
    for n in range(topics):
        seconds += produce(broker, per_topic, 1, topic=routed_topic(n), seed=n)
    return seconds


def last_job_id(spark: Any) -> int:
    """Run a marker job and return its id: Spark numbers jobs in the order they start."""
    context = spark.sparkContext
    context.setJobGroup(_MARKER_GROUP, "benchmark marker")
    try:
        spark.range(1).count()
        return max(context.statusTracker().getJobIdsForGroup(_MARKER_GROUP))
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def run_job(spark: Any, config: Any, checkpoint: Path) -> dict[str, Any]:
    """Run one job: seconds, CPU seconds, micro-batches and Spark jobs per micro-batch."""
    before = last_job_id(spark)
    seconds, cpu = timed_run(spark, config)
    jobs = last_job_id(spark) - before - 1
    ends = batch_ends(checkpoint)
    return {
        "seconds": seconds,
        "cpu_seconds": job_cpu_seconds(cpu),
        "batches": len(ends),
        "spark_jobs": jobs,
        "jobs_per_batch": jobs / max(len(ends), 1),
        "after_first_seconds": ends[-1] - ends[0] if len(ends) > 1 else None,
    }


def batch_ends(checkpoint: Path) -> list[float]:
    """When each micro-batch ended: the times Spark wrote its commit-log entries, in batch order."""
    entries = sorted(
        (int(p.name), p.stat().st_mtime) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()
    )
    return [mtime for _, mtime in entries]


def after_first_rate(result: dict[str, Any], max_offsets: int) -> float | None:
    """Messages per second of the micro-batches after the first (the one that creates the tables)."""
    seconds = result["after_first_seconds"]
    if not seconds:
        return None
    return (result["messages"] - min(max_offsets, result["messages"])) / seconds


def rows_committed(config: Any, namespace: str) -> int:
    """Rows the tables of ``namespace`` hold (their current snapshots' summaries)."""
    from tests.support.tables import catalog_from_options

    catalog = catalog_from_options({k: str(v) for k, v in config.sink_options().items()})
    total = 0
    for identifier in catalog.list_tables(namespace):
        snapshot = catalog.load_table(identifier).current_snapshot()
        if snapshot is not None and snapshot.summary is not None:
            total += int(snapshot.summary.get("total-records") or 0)
    return total


def single_run(spark: Any, broker: TansuBroker, root: Path, name: str, args: argparse.Namespace) -> dict:
    """One run of the single topic into one table."""
    config = job_config(
        broker, root, name, {"topics": [SINGLE_TOPIC]}, {"table": f"{name}.events"}, args.max_offsets
    )
    result = run_job(spark, config, root / f"checkpoint-{name}")
    return {**result, "tables": 1, "messages": args.single_messages, "rows": rows_committed(config, name)}


def routed_run(
    spark: Any,
    broker: TansuBroker,
    root: Path,
    name: str,
    topics: int,
    args: argparse.Namespace,
    *,
    packed: bool = True,
    in_source: bool = True,
) -> dict:
    """One run of the first ``topics`` routed topics, each into its table (all of them: by pattern).

    ``packed=False`` reads with ``max-partitions`` set to ``--unpacked-tasks`` (default: the
    topics, each topic-partition in a task of its own).
    """
    subscription: dict[str, Any] = (
        {"topic-pattern": ROUTED_PREFIX + "\\d{3}"}
        if topics == args.topics
        else {"topics": [routed_topic(n) for n in range(topics)]}
    )
    sink = {
        "route.by": "topic",
        "route.table-template": f"{name}.{{topic}}",
        "dead-letter.table": f"{name}_dlq.dead_letters",
    }
    kafka: dict[str, Any] = {} if packed else {"max-partitions": args.unpacked_tasks or topics}
    if not in_source:
        kafka["write-in-source"] = False
    config = job_config(broker, root, name, subscription, sink, args.max_offsets, kafka)
    result = run_job(spark, config, root / f"checkpoint-{name}")
    messages = topics * args.messages_per_topic
    return {**result, "tables": topics, "messages": messages, "rows": rows_committed(config, name)}


def describe(kind: str, result: dict[str, Any], load: float, max_offsets: int) -> str:
    """One line about a run; adds its rates and the load average to ``result``."""
    rate = result["messages"] / result["seconds"]
    later = after_first_rate(result, max_offsets)
    result.update(rate=rate, after_first_rate=later, load_average=load)
    return (
        f"{kind:>6}: {result['rows']:,} rows into {result['tables']} table(s) in {result['seconds']:.1f} s = "
        f"{rate:,.0f} msg/s ({f'{later:,.0f}' if later else '-'} msg/s after the first micro-batch); "
        f"{result['cpu_seconds']:.0f} CPU s; {result['batches']} micro-batches, "
        f"{result['jobs_per_batch']:.1f} Spark jobs per micro-batch; load average {load:.1f}"
    )


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--messages-per-topic", type=int, default=5_000)
    parser.add_argument("--single-messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-offsets", type=int, default=250_000, help="max-offsets-per-trigger")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="3g")
    parser.add_argument(
        "--contenders",
        type=lambda v: [k.strip() for k in v.split(",") if k.strip()],
        default=["single", "routed"],
        help="runs per round, in order: single, routed, unpacked (routed with one task per "
        "topic-partition), routed-sink (routed, every row through the sink's write tasks)",
    )
    parser.add_argument(
        "--unpacked-tasks",
        type=int,
        default=0,
        help="kafka.max-partitions of the 'unpacked' contender (default: the topics)",
    )
    args = parser.parse_args(argv)
    if "single" not in args.contenders or not set(args.contenders) <= {
        "single",
        "routed",
        "unpacked",
        "routed-sink",
    }:
        parser.error("--contenders: 'single' plus any of 'routed', 'unpacked', 'routed-sink'")
    if args.topics < 10 or args.topics > 1000:
        parser.error("--topics must be between 10 and 1000")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from icesink.jobs.spark import get_spark

    root = Path(tempfile.mkdtemp(prefix="icesink-routing-bench-"))
    (root / "warehouse").mkdir()
    with TansuBroker(log_dir=root) as broker:
        produced_s = produce_all(broker, args.topics, args.messages_per_topic, args.single_messages)
        print(
            f"produced {args.topics} topics x {args.messages_per_topic:,} and 1 topic x "
            f"{args.single_messages:,} messages of ~{MESSAGE_BYTES} B in {produced_s:.0f} s",
            flush=True,
        )
        conf = {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory}
        spark = get_spark("icesink-routing-bench", args.master, conf)
        spark.sparkContext.setLogLevel("ERROR")
        # Two micro-batches: the first through the sink, the second written by the decoding tasks.
        warm_args = argparse.Namespace(
            **{**vars(args), "max_offsets": args.topics // 10 * args.messages_per_topic // 2}
        )
        warm = routed_run(spark, broker, root, "warmup", args.topics // 10, warm_args)
        print(
            f"warm-up ({warm['tables']} tables): {warm['messages'] / warm['seconds']:,.0f} msg/s "
            f"(not counted), {warm['jobs_per_batch']:.1f} Spark jobs per micro-batch",
            flush=True,
        )
        results = _rounds(spark, broker, root, args)
        spark.stop()
    summarize(results, warm, args)
    return 0


def _rounds(spark: Any, broker: TansuBroker, root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """``--rounds`` rounds of the contenders, in order; each run's figures, printed as it ends."""
    results: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        rates: dict[str, float] = {}
        for kind in args.contenders:
            load = os.getloadavg()[0]
            name = f"{kind}_{round_}"
            if kind == "single":
                result = single_run(spark, broker, root, name, args)
            else:
                packed, in_source = kind != "unpacked", kind != "routed-sink"
                result = routed_run(
                    spark,
                    broker,
                    root,
                    name.replace("-", "_"),
                    args.topics,
                    args,
                    packed=packed,
                    in_source=in_source,
                )
            print(f"round {round_ + 1} {describe(kind, result, load, args.max_offsets)}", flush=True)
            results.append({"round": round_ + 1, "kind": kind, **result})
            rates[kind] = result["rate"]
        print(
            f"round {round_ + 1}: "
            + ", ".join(f"{k} / single = {rates[k] / rates['single']:.2f}" for k in rates if k != "single"),
            flush=True,
        )
    return results


def summarize(results: list[dict[str, Any]], warm: dict[str, Any], args: argparse.Namespace) -> None:
    """Print the medians, the ratios and the Spark jobs per micro-batch, then everything as JSON."""
    by_kind = {k: [r for r in results if r["kind"] == k] for k in args.contenders}
    medians = {k: statistics.median(r["rate"] for r in rs) for k, rs in by_kind.items()}
    ratios = {
        k: [r["rate"] / s["rate"] for s, r in zip(by_kind["single"], rs, strict=True)]
        for k, rs in by_kind.items()
        if k != "single"
    }
    jobs = {k: sorted({round(r["jobs_per_batch"], 1) for r in rs}) for k, rs in by_kind.items()}
    later = {
        k: [r["after_first_rate"] / s["after_first_rate"] for s, r in zip(by_kind["single"], rs, strict=True)]
        for k, rs in by_kind.items()
        if k != "single" and all(r["after_first_rate"] for r in rs + by_kind["single"])
    }
    for kind, values in ratios.items():
        print(
            f"median: single {medians['single']:,.0f} msg/s, {kind} ({args.topics} tables) "
            f"{medians[kind]:,.0f} msg/s, {kind} / single {statistics.median(values):.2f} "
            f"(rounds: {', '.join(f'{x:.2f}' for x in values)}); Spark jobs per micro-batch: "
            f"single {jobs['single']}, {kind} {jobs[kind]} ({warm['tables']} tables: "
            f"{warm['jobs_per_batch']:.1f})"
        )
        if kind in later:
            print(
                f"after the first micro-batch (which creates the tables): {kind} / single "
                f"{statistics.median(later[kind]):.2f} (rounds: {', '.join(f'{x:.2f}' for x in later[kind])})"
            )
    summary = {
        "benchmark": "routing_tables",
        "topics": args.topics,
        "messages_per_topic": args.messages_per_topic,
        "single_messages": args.single_messages,
        "master": args.master,
        "median_messages_per_s": {k: round(v) for k, v in medians.items()},
        "ratios": {k: [round(x, 3) for x in values] for k, values in ratios.items()},
        "ratios_after_first_batch": {k: [round(x, 3) for x in values] for k, values in later.items()},
        "runs": results,
        "warm_up": warm,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    raise SystemExit(main())
