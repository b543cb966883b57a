"""Kafka to Iceberg throughput: 1 KB JSON messages from a real broker into a table, on ``local[2]``.

Starts a Tansu broker on 127.0.0.1, produces ``--messages`` JSON messages of about
1 KB (13 fields, a nested object, an array, an ISO timestamp string, text) over
``--partitions`` partitions, then runs the Kafka-to-Iceberg job
(:func:`icesink.jobs.kafka.job.main.run`, the Python Kafka source, schema inferred
per batch) with ``availableNow``, ``--runs`` times, and reports
messages per second (median), from the query's start to its end, and where the time
goes: the sink's step timings as its metrics endpoint serves them; "source and Spark"
is the rest (offset planning, reading Kafka inside the decode job, scheduling).

    .venv/bin/python -m benchmarks.kafka_throughput --messages 300000 --runs 3

Each run appends to a table that exists already, with the messages' type, as a stream
does after its first micro-batch (``--table existing``; a warm-up run of each mode
creates it); ``--table fresh`` makes every run create its own table, which then takes
the sink's path of a new table. ``--decode`` names the modes to compare, one run each
per round, taking turns: ``written`` (the job's default: the source's tasks decode the
values and, where the table allows, write them), ``in-source`` (decoded in the source,
written by the sink's tasks: ``kafka.write-in-source: false``) and ``apart`` (decoded
by a pass of their own: ``kafka.decode-in-source: false``). A mode may name the source's
tasks per micro-batch after a slash, ``written/4`` (``kafka.max-partitions: 4``); without
one the job's default holds (one task per core).

The JVM starts once; warm-up runs (not counted, ``--warmup-runs``) let its JIT compile the
hot paths, as in a stream that has been running for a while: the JIT compiler's own CPU
time per run falls from about 3 s in the second run to about 1 s from the fourth on. Producing
the messages is not timed. Besides wall-clock messages/s, the CPU seconds of the driver,
the JVM and Spark's Python workers are reported (the broker's are shown apart, and not
counted as the job's): on a machine shared with other work, messages per CPU second is
the figure that does not depend on what else runs.
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

from benchmarks._batch_times import BatchTimes
from benchmarks._kafka_messages import MESSAGE_BYTES, TOPIC, produce
from benchmarks._process_cpu import job_cpu_seconds, tree_cpu_seconds
from tests.support.tansu import TansuBroker

WRITTEN, IN_SOURCE, APART = "written", "in-source", "apart"  # see the module docstring
_KAFKA_OPTIONS = {
    WRITTEN: {},
    IN_SOURCE: {"write-in-source": False},
    APART: {"decode-in-source": False},
}
_STEPS = ("decode", "decode_dead_letters", "schema", "normalize", "route", "write", "commit")


def job_config(
    broker: TansuBroker,
    root: Path,
    name: str,
    subscription: dict[str, Any],
    sink: dict[str, Any],
    max_offsets: int | None,
    kafka_options: dict[str, Any] | None = None,
) -> Any:
    """The job's validated configuration: the Python source from the earliest offsets, ``availableNow``.

    Args:
        broker: The broker.
        root: Holds the SQLite catalog, the warehouse and the checkpoint (named after ``name``).
        name: Names the checkpoint.
        subscription: ``{"topics": [...]}`` or ``{"topic-pattern": ...}``.
        sink: The sink options besides the catalog and the metrics port.
        max_offsets: ``kafka.max-offsets-per-trigger``; ``None``: one micro-batch.
        kafka_options: More keys of the ``kafka`` section (``max-partitions``, ...).
    """
    from icesink.jobs.kafka.job.validate import validate

    kafka: dict[str, Any] = {
        "bootstrap-servers": broker.bootstrap_servers,
        **subscription,
        "starting-offsets": "earliest",
        "source": "python",
    }
    if max_offsets:
        kafka["max-offsets-per-trigger"] = max_offsets
    kafka.update(kafka_options or {})
    catalog = {
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{root}/catalog.db",
        "catalog.warehouse": f"file://{root}/warehouse",
        "metrics.port": 0,
    }
    return validate(
        {
            "kafka": kafka,
            "sink": {**sink, **catalog},
            "trigger": {"available-now": True},
            "checkpoint-location": str(root / f"checkpoint-{name}"),
        }
    )


def timed_run(spark: Any, config: Any, metrics: Any = None) -> tuple[float, dict[str, float]]:
    """Run the job to its end: wall-clock seconds, and CPU seconds by kind (:func:`tree_cpu_seconds`).

    ``metrics`` (a :class:`~icesink.metrics.SinkMetrics`) takes the sink's metrics, to read after the run.
    """
    from icesink.jobs.kafka.job.main import run as run_job

    cpu_before = tree_cpu_seconds()
    start = time.perf_counter()
    code = run_job(config, spark, metrics)
    elapsed = time.perf_counter() - start
    cpu_after = tree_cpu_seconds()
    if code != 0:
        raise RuntimeError(f"the job failed (exit code {code})")
    return elapsed, {kind: cpu_after[kind] - cpu_before[kind] for kind in cpu_after}


def run_once(
    spark: Any,
    broker: TansuBroker,
    root: Path,
    run: int,
    max_offsets: int | None,
    decode: str = WRITTEN,
    fresh: bool = False,
    batch_times: BatchTimes | None = None,
) -> dict[str, Any]:
    """One run of mode ``decode`` (see the module); ``fresh``: into a table of its own."""
    from icesink.metrics import SinkMetrics

    mode = decode.replace("-", "_").replace("/", "_tasks")
    name = f"events_{mode}_{run}" if run >= 0 else f"warmup_{mode}_{-run}"
    table = f"bench.{name}" if fresh else f"bench.events_{mode}"
    kafka = mode_options(decode)
    config = job_config(broker, root, name, {"topics": [TOPIC]}, {"table": table}, max_offsets, kafka)
    metrics = SinkMetrics()  # read after the run: the job's sink stops serving its metrics as it closes
    if batch_times is not None:
        batch_times.take(wait_s=0)  # nothing of an earlier run
    elapsed, cpu = timed_run(spark, config, metrics)
    batches_s = batch_times.take() if batch_times is not None else 0.0
    steps: dict[str, float] = {}
    rows = 0.0
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.labels.get("table") != table:
                continue
            if sample.name == "icesink_step_duration_seconds_sum":
                steps[sample.labels["step"]] = sample.value
            elif sample.name == "icesink_rows_written_total":
                rows += sample.value
    return {
        "seconds": elapsed,
        "cpu_seconds": job_cpu_seconds(cpu),
        "cpu": cpu,
        "rows": int(rows),
        "steps": steps,
        "batches_seconds": batches_s,
    }


def mode_options(mode: str) -> dict[str, Any]:
    """The ``kafka`` options of a mode: ``written``, ``in-source`` or ``apart``, maybe ``/<tasks>``.

    Raises:
        ValueError: ``mode`` is none of these.
    """
    decode, _, tasks = mode.partition("/")
    if decode not in _KAFKA_OPTIONS or (tasks and not (tasks.isdigit() and int(tasks) > 0)):
        raise ValueError(f"not a mode: {mode!r}")
    options: dict[str, Any] = dict(_KAFKA_OPTIONS[decode])
    if tasks:
        options["max-partitions"] = int(tasks)
    return options


def _is_mode(mode: str) -> bool:
    try:
        mode_options(mode)
    except ValueError:
        return False
    return True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--warmup-runs", type=int, default=3, help="runs first, not counted (JVM JIT warm-up)"
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0, help="0: one micro-batch per run")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="3g")
    parser.add_argument(
        "--decode",
        type=lambda v: [k.strip() for k in v.split(",") if k.strip()],
        default=[IN_SOURCE],
        help="the modes to compare, one run each per round, taking turns: written, in-source, apart; "
        "each maybe with the source's tasks per micro-batch, as written/4",
    )
    parser.add_argument(
        "--table",
        choices=("existing", "fresh"),
        default="existing",
        help="append to a table with the messages' type (as a running stream), or create one per run",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.decode or not all(_is_mode(mode) for mode in args.decode):
        parser.error(f"--decode: some of {sorted(_KAFKA_OPTIONS)} (each maybe /<tasks>), separated by commas")
    fresh = args.table == "fresh"

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from icesink.jobs.spark import get_spark

    root = Path(tempfile.mkdtemp(prefix="icesink-kafka-bench-"))
    (root / "warehouse").mkdir()
    with TansuBroker(log_dir=root) as broker:
        produce_s = produce(broker, args.messages, args.partitions)
        print(f"produced {args.messages:,} messages of ~{MESSAGE_BYTES} B in {produce_s:.1f} s", flush=True)
        spark = get_spark(
            "icesink-kafka-bench",
            args.master,
            {"spark.ui.enabled": "false", "spark.driver.memory": args.driver_memory},
        )
        spark.sparkContext.setLogLevel("ERROR")
        batch_times = BatchTimes().listen(spark)
        for warmup in range(max(args.warmup_runs, 0 if fresh else len(args.decode))):
            mode = args.decode[warmup % len(args.decode)]  # each mode's table is created by its first
            result = run_once(
                spark, broker, root, -1 - warmup, args.max_offsets_per_trigger or None, mode, fresh
            )
            print(
                f"warm-up run: {args.messages / result['seconds']:,.0f} messages/s (not counted)", flush=True
            )
        results = _counted_runs(spark, broker, root, args, batch_times)
        spark.stop()
    _report(args, results)
    return 0


def _counted_runs(
    spark: Any, broker: TansuBroker, root: Path, args: argparse.Namespace, batch_times: BatchTimes
) -> list[dict[str, Any]]:
    """``--runs`` rounds of every ``--decode`` mode, taking turns; each run's figures, printed as it ends."""
    fresh = args.table == "fresh"
    results = []
    for run in range(args.runs):
        for decode in args.decode:
            load = os.getloadavg()[0]
            result = run_once(
                spark, broker, root, run, args.max_offsets_per_trigger or None, decode, fresh, batch_times
            )
            if result["rows"] != args.messages:
                raise RuntimeError(f"run {run + 1} wrote {result['rows']:,} rows, not {args.messages:,}")
            result.update(
                decode=decode,
                load_average=load,
                rate=args.messages / result["seconds"],
                per_cpu_second=args.messages / result["cpu_seconds"],
                batch_rate=args.messages / result["batches_seconds"] if result["batches_seconds"] else 0.0,
            )
            results.append(result)
            steps = ", ".join(f"{s} {result['steps'].get(s, 0.0):.1f}" for s in _STEPS)
            cpu = ", ".join(f"{k} {v:.1f}" for k, v in result["cpu"].items())
            print(
                f"run {run + 1} (decoded {decode}): {result['rows']:,} rows in "
                f"{result['seconds']:.1f} s = {result['rate']:,.0f} messages/s "
                f"(micro-batches {result['batches_seconds']:.1f} s = "
                f"{result['batch_rate']:,.0f} messages/s); "
                f"{result['cpu_seconds']:.1f} CPU s = {result['per_cpu_second']:,.0f} messages per CPU "
                f"second ({cpu}; load average {load:.1f}); "
                f"steps (s): {steps}",
                flush=True,
            )
    return results


def _report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    """The medians of each mode, then every run as one line of JSON."""
    for decode in args.decode:
        mine = [r for r in results if r["decode"] == decode]
        print(
            f"median (decoded {decode}): {statistics.median(r['rate'] for r in mine):,.0f} messages/s on "
            f"{args.master}, {statistics.median(r['per_cpu_second'] for r in mine):,.0f} messages per CPU "
            f"second, {statistics.median(r['batch_rate'] for r in mine):,.0f} messages/s within the "
            f"micro-batches ({args.messages:,} x ~1 KB JSON messages)"
        )
    median = statistics.median(r["rate"] for r in results)
    per_cpu = statistics.median(r["per_cpu_second"] for r in results)
    print(
        json.dumps(
            {
                "benchmark": "kafka_throughput",
                "messages": args.messages,
                "master": args.master,
                "median_messages_per_s": round(median),
                "median_messages_per_cpu_s": round(per_cpu),
                "runs": results,
            }
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
