"""The Kafka job against Iceberg's Kafka Connect sink: same broker, same messages, same run.

Starts one Apache Kafka broker (KRaft, :class:`icesink.jobs.local_servers.kafka.KafkaBroker`),
produces ``--messages`` JSON messages of about 1 KB (the generator of
``benchmarks/kafka_throughput.py``) over ``--partitions`` partitions, then runs, round by round
and each time in a new process, into a table of its own in one SQLite catalog and warehouse:

- icesink's Kafka job (``icesink.jobs.kafka.job``, Spark's ``format("kafka")`` source,
  ``availableNow``, schema inferred, no ``_kafka_*`` columns, on ``--master``), run by
  ``benchmarks/_kafka_job_process.py``, until its query has read and committed everything;
- Kafka Connect standalone with Iceberg's sink (``benchmarks/_kafka_connect.py``:
  ``--tasks`` tasks, its own control topic, ``iceberg.control.commit.interval-ms`` of
  ``--commit-interval-ms``, the table created from the first records), until the table's
  snapshot holds every message.

The job reads the topic in ``--job-batches`` micro-batches (``maxOffsetsPerTrigger``), so that
it has a steady state to measure. The two take turns, the first of a round changing from round
to round. A thread samples each run's process tree's CPU seconds from ``/proc``
(:class:`benchmarks._process_cpu.TreeCpuSampler`: the job's interpreter, its JVM, Spark's
Python workers; Connect's JVM), read at the commit times of the run's snapshots
(:mod:`benchmarks._commit_windows`). Per run, two windows:

- the whole run: from the process's launch to the commit of the snapshot holding the last
  message: seconds, messages per second, messages per CPU second;
- the steady state: from its first commit to that last one (the job's micro-batches after
  the first, Connect's commits after the first): messages per second and per CPU second;
  what the whole run cost beyond its messages at that steady cost is its start-up CPU.

The broker's CPU is shown apart. Both tables are read back (pyiceberg): every run must hold
each message's ``event_id`` once. The medians per contender, the median of the rounds'
icesink / Connect ratios of each figure, and the message count at which a whole run would
reach 2x Connect per CPU second follow (:mod:`benchmarks._kafka_connect_report`), the last
line the result as JSON.

    .venv/bin/python -m benchmarks.kafka_connect --messages 1000000 --rounds 3

The first run fetches Kafka Connect and Iceberg's sink with ``mvn`` (``jvm/kafka-connect/pom.xml``)
into ``--jars``. The figures: benchmarks/README.md, "The Kafka job against Iceberg's Kafka
Connect sink".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._commit_windows import commits_of, run_figures
from benchmarks._kafka_connect import (
    IcebergSinkSettings,
    KafkaConnect,
    default_jars_folder,
    fetch_connect_jars,
)
from benchmarks._kafka_connect_report import CONNECT, ICESINK, run_line, summarize, summary_lines
from benchmarks._kafka_job_process import RESULT_PREFIX
from benchmarks._kafka_messages import TOPIC, produce
from benchmarks._kafka_tables import CATALOG, NAMESPACE, catalog_of, check_rows, committed, file_format
from benchmarks._process_cpu import TreeCpuSampler

REPO_ROOT = Path(__file__).resolve().parents[1]
POLL_INTERVAL_S = 0.5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]", help="the job's Spark master")
    parser.add_argument(
        "--job-batches",
        type=int,
        default=8,
        help="the job's micro-batches (its maxOffsetsPerTrigger: messages / this); 1: one batch",
    )
    parser.add_argument("--tasks", type=int, default=2, help="the Iceberg sink's tasks.max")
    parser.add_argument(
        "--commit-interval-ms", type=int, default=1000, help="iceberg.control.commit.interval-ms"
    )
    parser.add_argument("--timeout-s", type=float, default=900.0, help="the longest one run may take")
    parser.add_argument(
        "--jars", type=Path, default=default_jars_folder(), help="Kafka Connect's jars' cache"
    )
    return parser.parse_args(argv)


def job_run(
    root: Path,
    broker: Any,
    run: str,
    args: argparse.Namespace,
    checkout: Path = REPO_ROOT,
    conf: dict[str, str] | None = None,
    sink: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The Kafka job in a new process until it has committed every message: its figures.

    Args:
        root: The run's folder (catalog, warehouse, checkpoints, logs).
        broker: The broker holding the topic.
        run: Names the run's table, checkpoint and log.
        args: The benchmark's arguments (``messages``, ``job_batches``, ``master``, ``timeout_s``).
        checkout: The checkout whose ``icesink`` (and run harness) the process imports.
        conf: Spark settings beside the job's own.
        sink: Sink options beside the run's own (``maintenance.enabled``, say).
    """
    table = f"{NAMESPACE}.icesink_{run}"
    config = _job_config(root, broker, table, run, args, conf or {})
    config["sink"].update(sink or {})
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", "benchmarks._kafka_job_process", json.dumps(config)]
    broker_before = _cpu_of(broker.pid)
    launched = time.time()
    with (root / f"job-{run}.log").open("w") as log:
        # In the checkout: ``-m`` puts the working folder ahead of PYTHONPATH.
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=checkout
        )
        cpu = TreeCpuSampler(process.pid).start()
        try:
            stdout, _ = process.communicate(timeout=args.timeout_s)
        finally:
            cpu.stop()
            if process.poll() is None:
                process.kill()
                process.wait()
    results = [
        line.removeprefix(RESULT_PREFIX) for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)
    ]
    if process.returncode != 0 or not results or json.loads(results[0])["code"] != 0:
        raise RuntimeError(
            f"the Kafka job's run {run} failed (exit {process.returncode}); see {root}/job-{run}.log"
        )
    commits = commits_of(catalog_of(root), table)
    if not commits:
        raise RuntimeError(f"the Kafka job's run {run} committed nothing to {table}")
    own = json.loads(results[0])
    return {
        "contender": ICESINK,
        "table": table,
        **run_figures(commits, args.messages, launched, cpu),
        "broker_cpu_seconds": _cpu_of(broker.pid) - broker_before,
        "cpu_by_process": {kind: round(s, 1) for kind, s in own["cpu"].items()},
        "jvm_cpu_by_thread": {kind: round(s, 1) for kind, s in own.get("jvm_threads", {}).items()},
    }


def _job_config(
    root: Path, broker: Any, table: str, run: str, args: argparse.Namespace, conf: dict[str, str]
) -> dict[str, Any]:
    """The job's configuration (its YAML file's mapping) for one run."""
    kafka: dict[str, Any] = {
        "bootstrap-servers": broker.bootstrap_servers,
        "topics": [TOPIC],
        "starting-offsets": "earliest",
        "source": "jvm",
    }
    if args.job_batches > 1:
        kafka["max-offsets-per-trigger"] = -(-args.messages // args.job_batches)
    return {
        "kafka": kafka,
        "value": {"metadata-columns": False},  # the values' fields only, as Connect writes them
        "sink": {
            "table": table,
            "catalog.name": CATALOG,
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root}/catalog.db",
            "catalog.warehouse": f"file://{root}/warehouse",
            "metrics.port": 0,
        },
        "trigger": {"available-now": True},
        "checkpoint-location": str(root / f"checkpoint-{run}"),
        "spark": {"master": args.master, "conf": {"spark.ui.enabled": "false", **conf}},
    }


def connect_run(
    root: Path, broker: Any, jars: list[Path], run: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Kafka Connect with Iceberg's sink in a new process until its table holds every message: its figures."""
    table = f"{NAMESPACE}.connect_{run}"
    control = f"control-iceberg-{run}"
    broker.create_topic(control, 1)
    sink = IcebergSinkSettings(
        name=f"iceberg-sink-{run}",
        topic=TOPIC,
        table=table,
        control_topic=control,
        catalog_name=CATALOG,
        catalog_file=root / "catalog.db",
        warehouse=root / "warehouse",
        tasks=args.tasks,
        commit_interval_ms=args.commit_interval_ms,
    )
    connect = KafkaConnect(root / f"connect-{run}", broker.bootstrap_servers, jars, sink)
    catalog = catalog_of(root)
    broker_before = _cpu_of(broker.pid)
    launched = time.time()
    connect.start(attempts=1)
    cpu = TreeCpuSampler(connect.pid).start()
    try:
        deadline = time.monotonic() + args.timeout_s
        while True:
            snapshot = committed(catalog, table)
            if snapshot is not None and snapshot["rows"] >= args.messages:
                break
            failure = connect.failure()
            if failure is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Kafka Connect's run {run}: {failure or 'timed out'}\n{connect.log_tail()}"
                )
            time.sleep(POLL_INTERVAL_S)
    finally:
        cpu.stop()
        connect.stop()
    return {
        "contender": CONNECT,
        "table": table,
        **run_figures(commits_of(catalog, table), args.messages, launched, cpu),
        "broker_cpu_seconds": _cpu_of(broker.pid) - broker_before,
        "ready_seconds": connect.start_seconds,
    }


def _cpu_of(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def rounds(root: Path, broker: Any, jars: list[Path], args: argparse.Namespace) -> list[dict[str, Any]]:
    """``args.rounds`` rounds of both contenders, the first changing each round; each run checked, printed."""
    catalog = catalog_of(root)
    results = []
    for run in range(args.rounds):
        order = (ICESINK, CONNECT) if run % 2 == 0 else (CONNECT, ICESINK)
        for contender in order:
            load = os.getloadavg()[0]
            if contender == ICESINK:
                result = job_run(root, broker, str(run), args)
            else:
                result = connect_run(root, broker, jars, run, args)
            check_rows(catalog, result["table"], args.messages)
            result.update(committed(catalog, result["table"]) or {}, round=run + 1, load_average=load)
            result["file_format"] = file_format(catalog, result["table"])
            results.append(result)
            print(run_line(result), flush=True)
    return results


@contextlib.contextmanager
def broker_with_messages(prefix: str, messages: int, partitions: int) -> Iterator[tuple[Path, Any]]:
    """A work folder (its SQLite catalog's namespace made) and a broker holding ``messages`` JSON
    messages over ``partitions``; the broker stopped after, the folder removed unless a run failed
    (it keeps the runs' logs)."""
    from icesink.jobs.local_servers.kafka import KafkaBroker

    root = Path(tempfile.mkdtemp(prefix=prefix))
    (root / "warehouse").mkdir()
    (root / "kafka").mkdir()
    catalog_of(root).create_namespace(NAMESPACE)
    broker = KafkaBroker(root / "kafka")
    broker.start()
    try:
        produce_s = produce(broker, messages, partitions)  # type: ignore[arg-type]
        print(f"produced {messages:,} messages of ~1 KB in {produce_s:.1f} s", flush=True)
        yield root, broker
    finally:
        broker.stop()
    shutil.rmtree(root)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    jars = fetch_connect_jars(args.jars)
    fetch_s = time.perf_counter() - started
    print(f"Kafka Connect and Iceberg's sink: {len(jars)} jars in {args.jars} ({fetch_s:.1f} s)", flush=True)
    with broker_with_messages("icesink-kafka-connect-", args.messages, args.partitions) as (root, broker):
        results = rounds(root, broker, jars, args)
    summary = summarize(results)
    print("\n".join(summary_lines(summary)))
    report = {"benchmark": "kafka_connect", "messages": args.messages, "partitions": args.partitions}
    settings = {
        "master": args.master,
        "job_batches": args.job_batches,
        "tasks": args.tasks,
        "commit_interval_ms": args.commit_interval_ms,
    }
    print(json.dumps({**report, **settings, "summary": summary, "runs": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
