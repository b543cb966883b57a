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

The two take turns, the first of a round changing from round to round. Per run: seconds from
the process's launch to the snapshot that holds the last message (its commit time), messages
per second, and messages per CPU second of the run's process tree from its start to that
moment (the job: its interpreter, its JVM, Spark's Python workers, each in the JSON line;
Connect: its JVM); the broker's CPU is shown apart. Both tables are read back (pyiceberg):
every run must hold each message's ``event_id`` once. The medians per contender and the
median of the rounds' ratios follow, the last line the result as JSON.

    .venv/bin/python -m benchmarks.kafka_connect --messages 200000 --rounds 3

The first run fetches Kafka Connect and Iceberg's sink with ``mvn`` (``jvm/kafka-connect/pom.xml``)
into ``--jars``. The figures: benchmarks/README.md, "The Kafka job against Iceberg's Kafka
Connect sink".
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._kafka_connect import (
    IcebergSinkSettings,
    KafkaConnect,
    default_jars_folder,
    fetch_connect_jars,
)
from benchmarks._kafka_job_process import RESULT_PREFIX
from benchmarks._kafka_messages import TOPIC, produce

REPO_ROOT = Path(__file__).resolve().parents[1]
CATALOG = "default"
NAMESPACE = "bench"
ICESINK, CONNECT = "icesink", "connect"
POLL_INTERVAL_S = 0.5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]", help="the job's Spark master")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0, help="0: the job's default")
    parser.add_argument("--tasks", type=int, default=2, help="the Iceberg sink's tasks.max")
    parser.add_argument(
        "--commit-interval-ms", type=int, default=1000, help="iceberg.control.commit.interval-ms"
    )
    parser.add_argument("--timeout-s", type=float, default=900.0, help="the longest one run may take")
    parser.add_argument(
        "--jars", type=Path, default=default_jars_folder(), help="Kafka Connect's jars' cache"
    )
    return parser.parse_args(argv)


def catalog_of(root: Path) -> Any:
    """pyiceberg's SQL catalog on the run's SQLite file: the job's, and Iceberg Java's JdbcCatalog's."""
    from pyiceberg.catalog.sql import SqlCatalog

    return SqlCatalog(CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")


def committed(catalog: Any, table: str) -> dict[str, Any] | None:
    """The table's current snapshot: rows, commit time, data files and snapshots; ``None`` before one."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        loaded = catalog.load_table(table)
    except NoSuchTableError:
        return None
    snapshot = loaded.current_snapshot()
    if snapshot is None:
        return None
    summary = snapshot.summary
    return {
        "rows": int(summary["total-records"]),
        "committed_at": snapshot.timestamp_ms / 1000,
        "data_files": int(summary["total-data-files"]),
        "snapshots": len(loaded.metadata.snapshots),
    }


def check_rows(catalog: Any, table: str, messages: int) -> None:
    """Fail unless ``table`` holds each message's ``event_id`` exactly once."""
    import pyarrow.compute as pc

    ids = catalog.load_table(table).scan(selected_fields=("event_id",)).to_arrow()["event_id"]
    distinct = pc.count_distinct(ids).as_py()
    if len(ids) != messages or distinct != messages:
        raise RuntimeError(
            f"{table} holds {len(ids):,} rows, {distinct:,} distinct messages, not {messages:,}"
        )


def job_run(root: Path, broker: Any, run: int, args: argparse.Namespace) -> dict[str, Any]:
    """The Kafka job in a new process until it has committed every message: its figures."""
    table = f"{NAMESPACE}.icesink_{run}"
    kafka: dict[str, Any] = {
        "bootstrap-servers": broker.bootstrap_servers,
        "topics": [TOPIC],
        "starting-offsets": "earliest",
        "source": "jvm",
    }
    if args.max_offsets_per_trigger:
        kafka["max-offsets-per-trigger"] = args.max_offsets_per_trigger
    config = {
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
        "spark": {"master": args.master, "conf": {"spark.ui.enabled": "false"}},
    }
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", "benchmarks._kafka_job_process", json.dumps(config)]
    broker_before = _cpu_of(broker.pid)
    launched = time.time()
    with (root / f"job-{run}.log").open("w") as log:
        done = subprocess.run(
            command,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=env,
            timeout=args.timeout_s,
            check=False,
        )
    results = [
        line.removeprefix(RESULT_PREFIX)
        for line in done.stdout.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    if done.returncode != 0 or not results or json.loads(results[0])["code"] != 0:
        raise RuntimeError(
            f"the Kafka job's run {run} failed (exit {done.returncode}); see {root}/job-{run}.log"
        )
    snapshot = committed(catalog_of(root), table)
    if snapshot is None:
        raise RuntimeError(f"the Kafka job's run {run} committed nothing to {table}")
    cpu = json.loads(results[0])
    figures = _figures(
        ICESINK, table, launched, snapshot, cpu["cpu_seconds"], _cpu_of(broker.pid) - broker_before
    )
    return {**figures, "cpu_by_process": {kind: round(s, 1) for kind, s in cpu["cpu"].items()}}


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
    try:
        deadline = time.monotonic() + args.timeout_s
        while True:
            snapshot = committed(catalog, table)
            if snapshot is not None and snapshot["rows"] >= args.messages:
                cpu_seconds = _cpu_of(connect.pid)
                break
            failure = connect.failure()
            if failure is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Kafka Connect's run {run}: {failure or 'timed out'}\n{connect.log_tail()}"
                )
            time.sleep(POLL_INTERVAL_S)
    finally:
        connect.stop()
    figures = _figures(CONNECT, table, launched, snapshot, cpu_seconds, _cpu_of(broker.pid) - broker_before)
    return {**figures, "ready_seconds": connect.start_seconds}


def _cpu_of(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _figures(
    contender: str,
    table: str,
    launched: float,
    snapshot: dict[str, Any],
    cpu_seconds: float,
    broker_cpu: float,
) -> dict[str, Any]:
    return {
        "contender": contender,
        "table": table,
        "seconds": snapshot["committed_at"] - launched,
        "cpu_seconds": cpu_seconds,
        "broker_cpu_seconds": broker_cpu,
        "rows": snapshot["rows"],
        "data_files": snapshot["data_files"],
        "snapshots": snapshot["snapshots"],
    }


def rounds(root: Path, broker: Any, jars: list[Path], args: argparse.Namespace) -> list[dict[str, Any]]:
    """``args.rounds`` rounds of both contenders, the first changing each round; each run checked, printed."""
    catalog = catalog_of(root)
    results = []
    for run in range(args.rounds):
        order = (ICESINK, CONNECT) if run % 2 == 0 else (CONNECT, ICESINK)
        for contender in order:
            load = os.getloadavg()[0]
            if contender == ICESINK:
                result = job_run(root, broker, run, args)
            else:
                result = connect_run(root, broker, jars, run, args)
            check_rows(catalog, result["table"], args.messages)
            result.update(
                round=run + 1,
                load_average=load,
                messages_per_s=args.messages / result["seconds"],
                messages_per_cpu_s=args.messages / result["cpu_seconds"],
            )
            results.append(result)
            print(
                f"round {run + 1} ({contender}): {result['seconds']:.1f} s = {result['messages_per_s']:,.0f} "
                f"messages/s; {result['cpu_seconds']:.1f} CPU s = {result['messages_per_cpu_s']:,.0f} "
                f"messages per CPU second; {result['data_files']} files in {result['snapshots']} snapshots "
                f"(broker {result['broker_cpu_seconds']:.1f} CPU s; load average {load:.1f})",
                flush=True,
            )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each contender's medians, and the medians of the rounds' icesink / Connect ratios."""
    summary: dict[str, Any] = {}
    for contender in (ICESINK, CONNECT):
        mine = [r for r in results if r["contender"] == contender]
        summary[contender] = {
            "median_messages_per_s": round(statistics.median(r["messages_per_s"] for r in mine)),
            "median_messages_per_cpu_s": round(statistics.median(r["messages_per_cpu_s"] for r in mine)),
        }
    ratios: dict[str, list[float]] = {"messages_per_s": [], "messages_per_cpu_s": []}
    for number in sorted({r["round"] for r in results}):
        pair = {r["contender"]: r for r in results if r["round"] == number}
        for key, values in ratios.items():
            values.append(pair[ICESINK][key] / pair[CONNECT][key])
    for key, values in ratios.items():
        summary[f"ratio_{key}"] = {
            "median": round(statistics.median(values), 2),
            "rounds": [round(v, 2) for v in values],
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from icesink.jobs.local_servers.kafka import KafkaBroker

    started = time.perf_counter()
    jars = fetch_connect_jars(args.jars)
    fetch_s = time.perf_counter() - started
    print(f"Kafka Connect and Iceberg's sink: {len(jars)} jars in {args.jars} ({fetch_s:.1f} s)", flush=True)
    root = Path(tempfile.mkdtemp(prefix="icesink-kafka-connect-"))
    (root / "warehouse").mkdir()
    (root / "kafka").mkdir()
    catalog_of(root).create_namespace(NAMESPACE)
    broker = KafkaBroker(root / "kafka")
    broker.start()
    try:
        produce_s = produce(broker, args.messages, args.partitions)  # type: ignore[arg-type]
        print(f"produced {args.messages:,} messages of ~1 KB in {produce_s:.1f} s", flush=True)
        results = rounds(root, broker, jars, args)
    finally:
        broker.stop()
    shutil.rmtree(root)  # kept when a run failed, for its logs
    summary = summarize(results)
    for contender in (ICESINK, CONNECT):
        figures = summary[contender]
        print(
            f"median ({contender}): {figures['median_messages_per_s']:,} messages/s, "
            f"{figures['median_messages_per_cpu_s']:,} messages per CPU second"
        )
    for key in ("messages_per_s", "messages_per_cpu_s"):
        ratio = summary[f"ratio_{key}"]
        print(f"icesink / Connect, {key}: {ratio['median']} (rounds {ratio['rounds']})")
    report = {"benchmark": "kafka_connect", "messages": args.messages, "partitions": args.partitions}
    settings = {"master": args.master, "tasks": args.tasks, "commit_interval_ms": args.commit_interval_ms}
    print(json.dumps({**report, **settings, "summary": summary, "runs": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
