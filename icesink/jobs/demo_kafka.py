"""``make demo-kafka``: the Kafka job from an Apache Kafka broker into a local table, and what it wrote.

Starts Apache Kafka (one KRaft broker and controller, :mod:`icesink.jobs.local_servers.kafka`;
``make env`` fetches its jars) on 127.0.0.1, produces ``--messages`` JSON orders over two
partitions (one in 500 of them not JSON, for the dead-letter table), runs the Kafka job
(:mod:`icesink.jobs.kafka.job`) on the embedded default (local Spark, a SQLite
catalog and a warehouse folder) with ``trigger: available-now`` until it has read them all,
prints what it wrote (rows, dead letters, files, snapshots), and stops the broker, on
success, error or Ctrl-C. Everything lives under ``<data-dir>/kafka`` and starts empty on
each run. ``--source jvm`` reads with Spark's Kafka connector instead of icesink's Python
source.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table

from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from icesink.jobs.local_servers.kafka import KafkaBroker

TOPIC = "orders"
TABLE = "demo.orders"
PARTITIONS = 2
NOT_JSON_EVERY = 500


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", type=Path, default=Path("demo-data"))
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--per-batch", type=int, default=5_000, help="max-offsets-per-trigger")
    parser.add_argument("--source", choices=("python", "jvm"), default="python")
    args = parser.parse_args(argv)
    root = args.data_dir.resolve() / "kafka"
    shutil.rmtree(root, ignore_errors=True)
    (root / "broker").mkdir(parents=True)
    broker = KafkaBroker(root / "broker")
    try:
        broker.start()
        print(f"Apache Kafka     {broker.bootstrap_servers} (up in {broker.start_seconds:.1f} s)", flush=True)
        broker.create_topic(TOPIC, PARTITIONS)
        broker.produce(TOPIC, [(i % PARTITIONS, None, order(i)) for i in range(args.messages)], linger_ms=20)
        print(f"produced         {args.messages:,} messages to {TOPIC} ({PARTITIONS} partitions)", flush=True)
        config = validate(job(broker.bootstrap_servers, root, args.per_batch, args.source))
        started = time.perf_counter()
        code = run(config)
        elapsed_s = time.perf_counter() - started
    finally:
        broker.stop()
        print("broker stopped", flush=True)
    if code != 0:
        print(f"the Kafka job failed (exit code {code})")
        return code
    catalog = load_catalog(
        "demo", type="sql", uri=f"sqlite:///{root / 'catalog.db'}", warehouse=f"file://{root}"
    )
    print_report(catalog.load_table(TABLE), catalog.load_table(f"{TABLE}__dlq"), elapsed_s)
    return 0


def order(i: int) -> bytes:
    """Message ``i``: a JSON order, or, one in ``NOT_JSON_EVERY``, a value that is not JSON."""
    if i % NOT_JSON_EVERY == NOT_JSON_EVERY - 1:
        return b"not json"
    event = {
        "order_id": i,
        "customer": f"c{i % 97}",
        "amount": round(5 + (i % 400) / 4, 2),
        "ts": "2024-05-01",
    }
    return json.dumps(event).encode()


def job(bootstrap_servers: str, root: Path, per_batch: int, source: str) -> dict[str, Any]:
    """The job's configuration (as its YAML file would hold it): the topic into a local table."""
    return {
        "kafka": {
            "bootstrap-servers": bootstrap_servers,
            "topics": [TOPIC],
            "starting-offsets": "earliest",
            "max-offsets-per-trigger": per_batch,
            "source": source,
        },
        "sink": {
            "table": TABLE,
            "catalog.name": "demo",
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{root / 'catalog.db'}",
            "catalog.warehouse": f"file://{root}",
            "metrics.port": None,
        },
        "trigger": {"available-now": True},
        "checkpoint-location": str(root / "checkpoint"),
        "spark": {
            "master": "local[2]",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        },
    }


def print_report(table: Table, dead_letters: Table, elapsed_s: float) -> None:
    """What the job wrote, read back from the tables: rows, dead letters, files, snapshots."""
    files = [task.file for task in table.scan().plan_files()]
    rows = table.scan().to_arrow()
    print()
    print(f"rows written     {rows.num_rows:,} in {elapsed_s:.1f} s (Spark's start included)")
    print(f"dead letters     {dead_letters.scan().to_arrow().num_rows:,} (the values that were not JSON)")
    print(f"data files       {len(files)}  ({sum(f.file_size_in_bytes for f in files) / 1e6:.2f} MB)")
    print(f"snapshots        {len(table.snapshots())}  (one a micro-batch)")
    print(f"columns          {', '.join(table.schema().column_names)}")
    print(f"table location   {table.location()}")


if __name__ == "__main__":
    raise SystemExit(main())
