"""Many topics into many tables: the Kafka job routing by topic and by field, on Apache Kafka.

- By topic: 20 topics under one ``--topic-pattern``, each into its own table, on both of
  the job's sources (the Python source in ``make test-kafka``: ``kafka_full``). Three of
  them carry JSON of their own shape that changes between micro-batches (a column added,
  an int outgrowing 32 bits); one topic is created while the job runs; one carries
  undecodable values. The job runs as a subprocess with a processing-time trigger and is
  stopped with SIGTERM.
- By field: one topic carrying three event types (``type``), each into its table
  through ``route.tables``; a fourth type and events without one are unroutable.
- SIGKILL: a routed job killed in the middle of a micro-batch, then restarted (``make
  test-faults``; make test kills the job on Spark's source in ``test_kafka_spark_source.py``
  and a routed sink with staged batches in ``tests/integration/test_one_or_many_tables.py``).

Each test reads the tables back: each holds exactly the rows of its topic (or event
type), each (partition, offset) once, and only its own columns; the rest are dead letters.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyiceberg.catalog import Catalog

from icesink.batch.source_write import SOURCE_FILE_SUFFIX
from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import (
    SOURCES_PYTHON_IN_FULL,
    require_source,
    start_job,
    started_batches,
    wait_for_batches,
)
from tests.support.processes import wait_until
from tests.support.tables import added_files, catalog_from_options

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KAFKA = {"_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp"}
TOPICS = 20
LATE = TOPICS - 1  # the topic created while the job runs
PER_TOPIC = 150  # messages of each topic before the shapes change
EVOLVED = 60  # more messages of topics 0-2, in their new shape
BAD_TOPIC, BAD_EVERY = 3, 25  # topic 3: every 25th value is not JSON
WAIT_S = 240
Position = tuple[int, int]
ValueOf = Callable[[int], bytes | None]


def value_of(n: int, i: int) -> bytes | None:
    """Message ``i`` of topic ``n``: its own fields; topics 0-2 change shape from ``PER_TOPIC`` on."""
    if n == BAD_TOPIC and i % BAD_EVERY == BAD_EVERY - 1:
        return b"not json"
    later = i >= PER_TOPIC
    event: dict[str, Any] = {"id": i}
    if n == 0:
        event.update(sku=f"s{i}", qty=3_000_000_000 + i if later else i)  # int, then long
        if later:
            event["price"] = i / 4
    elif n == 1:
        event["user"] = {"name": f"u{i}", "age": i % 90}
        if later:
            event["tags"] = ["a", f"t{i}"]
    elif n == 2:
        event.update(ts="2024-05-01T12:00:00Z", score=i)
        if later:
            event.update(flag=i % 2 == 0, note=f"n{i}")
    else:
        event[f"f{n}"] = f"v{n}-{i}"
    return json.dumps(event).encode()


def own_columns(n: int) -> set[str]:
    """The columns of topic ``n``'s table."""
    own = {0: {"sku", "qty", "price"}, 1: {"user", "tags"}, 2: {"ts", "score", "flag", "note"}}
    return {"id", *own.get(n, {f"f{n}"})} | KAFKA


def produce(broker: KafkaBroker, topic: str, indexes: range, value: ValueOf) -> dict[Position, int]:
    """Produce message ``i`` of ``indexes`` to partition 0; the message index by position."""
    delivered = broker.produce(topic, [(0, None, value(i)) for i in indexes], linger_ms=10)
    return dict(zip(delivered, indexes, strict=True))


def sink_options(tmp_path: Path, **route: str) -> dict[str, Any]:
    return {
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
        "metrics.port": None,
        **route,
    }


def job_data(
    broker: KafkaBroker,
    tmp_path: Path,
    pattern: str,
    sink: dict[str, Any],
    **kafka: Any,
) -> dict:
    return {
        "kafka": {
            "bootstrap-servers": broker.bootstrap_servers,
            "topic-pattern": pattern,
            "starting-offsets": "earliest",
            "source": "python",
            **kafka,
        },
        "sink": sink,
        "checkpoint-location": str(tmp_path / "checkpoint"),
        # As deployed: a query that fails to start on a loaded machine (Spark gives a new
        # Python worker 10 s to connect back) starts again from its checkpoint.
        "max-restarts": 2,
        "spark": {
            "master": "local[2]",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
        },
    }


def catalog_of(data: dict[str, Any]) -> Catalog:
    return catalog_from_options({k: str(v) for k, v in validate(data).sink_options().items()})


def committed_rows(catalog: Catalog, table: str) -> int:
    """Rows of ``table`` by its current snapshot's summary (0 when it does not exist yet)."""
    if not catalog.table_exists(table):
        return 0
    snapshot = catalog.load_table(table).current_snapshot()
    return int(snapshot.summary.get("total-records") or 0) if snapshot and snapshot.summary else 0


def read(catalog: Catalog, table: str) -> list[dict[str, Any]]:
    return catalog.load_table(table).scan().to_arrow().to_pylist()


def check_table(rows: list[dict[str, Any]], produced: dict[Position, int], topic: str) -> None:
    """Each produced (partition, offset) once, holding what its message held, and nothing else."""
    positions = Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in rows)
    assert not [p for p, n in positions.items() if n > 1], f"{topic}: rows written twice"
    assert set(positions) == set(produced), f"{topic}: missing or extra rows"
    for row in rows:
        assert row["_kafka_topic"] == topic
        assert row["id"] == produced[(row["_kafka_partition"], row["_kafka_offset"])]


def dead_positions(catalog: Catalog, table: str) -> Counter[tuple[str, int, int]]:
    """(topic, partition, offset) of each dead letter."""
    letters = [json.loads(r["original_row"]) for r in read(catalog, table)]
    return Counter((d["_kafka_topic"], d["_kafka_partition"], d["_kafka_offset"]) for d in letters)


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)  # a job process of its own each
def test_twenty_topics_each_into_its_own_table_with_its_own_schema(
    apache_kafka: KafkaBroker, source: str, tmp_path: Path
) -> None:
    require_source(source)
    prefix = f"rt{source}{os.getpid()}"
    topics = [f"{prefix}-{n:02d}" for n in range(TOPICS)]
    tables = [f"routed.{prefix}_{n:02d}" for n in range(TOPICS)]  # the template, sanitized
    produced: dict[int, dict[Position, int]] = {}
    for n in range(LATE):
        apache_kafka.create_topic(topics[n])
        produced[n] = produce(apache_kafka, topics[n], range(PER_TOPIC), partial(value_of, n))
    sink = sink_options(
        tmp_path,
        **{
            "route.by": "topic",
            "route.table-template": "routed.{topic}",
            "dead-letter.table": "routed.dead_letters",
        },
    )
    data = job_data(apache_kafka, tmp_path, f"{prefix}-\\d\\d", sink)
    data["kafka"]["source"] = source
    data["trigger"] = {"interval": "1 second"}
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(data))
    catalog = catalog_of(data)
    bad = {(0, o) for o in range(PER_TOPIC) if o % BAD_EVERY == BAD_EVERY - 1}

    def all_in(ns: range) -> bool:
        return all(committed_rows(catalog, tables[n]) == len(produced[n]) - len(bad) * (n == 3) for n in ns)

    log = tmp_path / "job.log"
    job = start_job(config_file, log)
    try:
        wait_until(lambda: all_in(range(LATE)), WAIT_S, "the first messages of 19 topics in their tables")
        batches_before = started_batches(tmp_path / "checkpoint")
        for n in (0, 1, 2):  # new shapes, in later micro-batches
            more = range(PER_TOPIC, PER_TOPIC + EVOLVED)
            produced[n].update(produce(apache_kafka, topics[n], more, partial(value_of, n)))
        apache_kafka.create_topic(topics[LATE])  # matches the pattern of the running query
        produced[LATE] = produce(apache_kafka, topics[LATE], range(PER_TOPIC), partial(value_of, LATE))
        wait_until(lambda: all_in(range(TOPICS)), WAIT_S, "every message in its table, the new topic's too")
        assert started_batches(tmp_path / "checkpoint") > batches_before
    finally:
        job.send_signal(signal.SIGTERM)  # the job stops its query between micro-batches
        code = job.wait(120)
    assert code == 0, log.read_text()[-4000:]

    for n in range(TOPICS):
        expected = {p: i for p, i in produced[n].items() if not (n == BAD_TOPIC and p in bad)}
        check_table(read(catalog, tables[n]), expected, topics[n])
        table = catalog.load_table(tables[n])
        assert {f.name for f in table.schema().fields} == own_columns(n), tables[n]
    assert dead_positions(catalog, "routed.dead_letters") == Counter(
        (topics[BAD_TOPIC], p, o) for p, o in bad
    )
    # The Python source writes in its own tasks, each table made from its topic's latest records
    # before its first batch; Spark's connector hands the records to the sink, which writes them.
    for n in range(TOPICS):
        table = catalog.load_table(tables[n])
        first_files = added_files(table, table.snapshots()[0])
        by_tasks = [SOURCE_FILE_SUFFIX + "-" in f for f in first_files]
        assert first_files and (all(by_tasks) if source == "python" else not any(by_tasks)), first_files
    first = {n: catalog.load_table(tables[n]).metadata.schemas[0] for n in (0, 1, 2)}
    assert str(first[0].find_field("qty").field_type) == "int"
    assert str(catalog.load_table(tables[0]).schema().find_field("qty").field_type) == "long"
    assert "price" not in {f.name for f in first[0].fields}
    assert "tags" not in {f.name for f in first[1].fields}
    assert not {"flag", "note"} & {f.name for f in first[2].fields}


EVENT_TABLES = {"click": "bus.clicks", "view": "bus.views", "buy": "bus.buys"}
EVENT_FIELDS = {"click": {"x", "y"}, "view": {"page"}, "buy": {"amount"}}
KINDS = ("click", "view", "buy", "refund", None)  # refund: not in route.tables; None: no type


def event_of(i: int) -> bytes:
    kind = KINDS[i % len(KINDS)]
    event: dict[str, Any] = {"id": i}
    if kind is not None:
        event["type"] = kind
    if kind == "click":
        event.update(x=i, y=-i)
    elif kind == "view":
        event["page"] = f"/p/{i}"
    elif kind in ("buy", "refund"):
        event["amount"] = i * 1.5
    return json.dumps(event).encode()


def test_one_topic_routed_by_a_field_to_three_tables(
    spark: Any, apache_kafka: KafkaBroker, tmp_path: Path, metrics_exports: None
) -> None:
    topic = f"bus{os.getpid()}"
    apache_kafka.create_topic(topic)
    produced = produce(apache_kafka, topic, range(500), event_of)
    sink = sink_options(
        tmp_path,
        **{
            "route.by": "field",
            "route.field": "type",
            "route.tables": json.dumps(EVENT_TABLES),
            "dead-letter.table": "bus.dead_letters",
        },
    )
    data = job_data(apache_kafka, tmp_path, topic, sink, **{"max-offsets-per-trigger": 200})
    data["trigger"] = {"available-now": True}
    assert run(validate(data), spark) == 0

    catalog = catalog_of(data)
    for kind, table in EVENT_TABLES.items():
        expected = {p: i for p, i in produced.items() if KINDS[i % len(KINDS)] == kind}
        rows = read(catalog, table)
        check_table(rows, expected, topic)
        assert {r["type"] for r in rows} == {kind}
        columns = {f.name for f in catalog.load_table(table).schema().fields}
        assert columns == {"id", "type", *EVENT_FIELDS[kind]} | KAFKA, table
    unroutable = {p for p, i in produced.items() if KINDS[i % len(KINDS)] in ("refund", None)}
    letters = read(catalog, "bus.dead_letters")
    assert Counter((r["_kafka_partition"], r["_kafka_offset"]) for r in map(_row, letters)) == Counter(
        unroutable
    )
    assert {r["reason"].split(":")[0] for r in letters} == {"unroutable"}


def _row(letter: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = json.loads(letter["original_row"])
    return row


@pytest.mark.faults_full
def test_sigkilled_mid_batch_then_restarted_each_table_holds_its_rows_once(
    apache_kafka: KafkaBroker, tmp_path: Path
) -> None:
    seed = int(os.environ.get("ICESINK_KILL_SEED", time.time_ns() % 1_000_000))
    rng = random.Random(seed)
    prefix = f"kill{os.getpid()}"
    produced: dict[int, dict[Position, int]] = {}
    for n in range(4):
        apache_kafka.create_topic(f"{prefix}-{n}")
        produced[n] = produce(apache_kafka, f"{prefix}-{n}", range(1_000), partial(value_of, 10 + n))
    sink = sink_options(tmp_path, **{"route.by": "topic", "route.table-template": "killed.{topic}"})
    data = job_data(apache_kafka, tmp_path, f"{prefix}-\\d", sink, **{"max-offsets-per-trigger": 800})
    data["trigger"] = {"available-now": True}  # 5 micro-batches of 4 tables each
    config_file = tmp_path / "job.yaml"
    config_file.write_text(yaml.safe_dump(data))

    batches, delay_s = rng.randrange(1, 4), rng.uniform(0.0, 3.0)
    job = start_job(config_file, tmp_path / "job-killed.log")
    wait_for_batches(job, tmp_path / "checkpoint" / "offsets", batches + 1, tmp_path / "job-killed.log")
    time.sleep(delay_s)  # a moment inside micro-batch ``batches`` (or the next)
    assert job.poll() is None, f"the job ended before it was killed (seed {seed})"
    os.killpg(job.pid, signal.SIGKILL)  # the driver, the JVM and the Python workers at once
    assert job.wait(60) == -signal.SIGKILL
    job = start_job(config_file, tmp_path / "job-final.log")
    assert job.wait(600) == 0, f"seed {seed}: " + (tmp_path / "job-final.log").read_text()[-4000:]

    catalog = catalog_of(data)
    for n in range(4):
        name = f"killed.{prefix}_{n}"
        check_table(read(catalog, name), produced[n], f"{prefix}-{n}")
        assert {f.name for f in catalog.load_table(name).schema().fields} == own_columns(10 + n)
        loaded = catalog.load_table(name)
        referenced = {task.file.file_path for task in loaded.scan().plan_files()}
        on_disk = {f"file://{p}" for p in Path(loaded.location().removeprefix("file://")).rglob("*.parquet")}
        assert on_disk == referenced, f"seed {seed}: files of crashed attempts left in {name}"
