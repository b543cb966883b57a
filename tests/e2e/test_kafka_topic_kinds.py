"""The Kafka job on topics whose offsets are not one record each, on Apache Kafka and both sources.

``make test`` runs each case on Spark's connector, ``make test-kafka`` on the Python source too.

- Transactions, read with ``isolation.level=read_committed``: the records of aborted
  transactions never reach the table, those of committed ones land once, though the
  transaction markers take offsets of their own and the topic ends on an aborted one.
- A compacted topic (``cleanup.policy=compact``), read after the log cleaner removed the
  older versions of its keys: the table holds the records the broker kept, each once,
  over the gaps compaction left in the offsets.
- A partition added to the topic between two runs of the job: the second run resumes
  from the checkpoint and reads the new partition from its start.

Each runs the job in the test's process on icesink's Python source and on Spark's
connector, and reads the table back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from icesink.jobs.kafka.job.main import run
from icesink.jobs.kafka.job.validate import validate
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_job import SOURCES_PYTHON_IN_FULL, job_config, require_source
from tests.support.processes import wait_until
from tests.support.tables import catalog_from_options

pytestmark = [pytest.mark.e2e]

TRANSACTIONS = 6
PER_TRANSACTION = 40
ABORTED = {1, 4, 5}  # the last one too: the topic ends on an abort marker
KEYS, VERSIONS = 20, 10
COMPACTION_TIMEOUT_S = 120.0  # bounds a wait: the log cleaner runs in the broker's own time
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.ms": "100",  # a record produced later than this rolls the segment: the cleaner takes it
    "min.cleanable.dirty.ratio": "0.01",
    "min.compaction.lag.ms": "0",
}


def read_table(tmp_path: Path, data: dict[str, Any], table: str) -> list[dict[str, Any]]:
    options = {k: str(v) for k, v in validate(data).sink_options().items()}
    return catalog_from_options(options).load_table(table).scan().to_arrow().to_pylist()


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_read_committed_takes_each_committed_record_once_and_no_aborted_one(
    spark: Any, apache_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    topic = f"txn-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic, 2)
    committed: set[int] = set()
    for t in range(TRANSACTIONS):
        numbers = range(t * PER_TRANSACTION, (t + 1) * PER_TRANSACTION)
        records = [(n % 2, None, json.dumps({"n": n, "txn": t}).encode()) for n in numbers]
        apache_kafka.produce_transaction(topic, records, f"{topic}-producer", commit=t not in ABORTED)
        committed |= set(numbers) if t not in ABORTED else set()
    data = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, "e2e.txn", 100, source)
    data["kafka"]["options"] = {"isolation.level": "read_committed"}
    assert run(validate(data), spark) == 0

    rows = read_table(tmp_path, data, "e2e.txn")
    assert sorted(r["n"] for r in rows) == sorted(committed)  # each committed record once
    assert not {r["txn"] for r in rows} & ABORTED
    positions = [(r["_kafka_partition"], r["_kafka_offset"]) for r in rows]
    assert len(set(positions)) == len(positions)
    # The markers take offsets: a committed record of transaction t sits past t markers of its partition
    assert all(r["_kafka_offset"] >= r["txn"] * (PER_TRANSACTION // 2 + 1) for r in rows)


def _compacted(broker: KafkaBroker, topic: str, rolls: list[int]) -> list[tuple[int, Any]] | None:
    """The records of ``topic`` once the cleaner kept one per key; ``None`` before.

    Each call first produces a record of its own key, which rolls the segment the older ones
    are in (``segment.ms``): the cleaner only compacts closed segments.
    """
    rolled = json.dumps({"k": "roll", "v": len(rolls)}).encode()
    rolls.append(broker.produce(topic, [(0, b"roll", rolled)])[0][1])
    held = [(offset, json.loads(value or b"{}")) for offset, _, value in broker.read_partition(topic, 0)]
    kept = [(offset, value) for offset, value in held if value["k"] != "roll"]
    return kept if len(kept) == KEYS else None


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_a_compacted_topic_lands_as_the_broker_kept_it(
    spark: Any, apache_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    topic = f"compacted-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic, 1, COMPACTED)
    changes = [(k, v) for v in range(VERSIONS) for k in range(KEYS)]  # every key changed 10 times
    records = [(0, f"key-{k}".encode(), json.dumps({"k": f"key-{k}", "v": v}).encode()) for k, v in changes]
    apache_kafka.produce(topic, records)
    rolls: list[int] = []
    kept = wait_until(lambda: _compacted(apache_kafka, topic, rolls), COMPACTION_TIMEOUT_S, "compaction")
    assert kept is not None
    assert {value["v"] for _, value in kept} == {VERSIONS - 1}  # each key's last version, once

    data = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, "e2e.compacted", 7, source)
    assert run(validate(data), spark) == 0

    rows = read_table(tmp_path, data, "e2e.compacted")
    offsets = [r["_kafka_offset"] for r in rows]
    assert len(set(offsets)) == len(offsets), "a record is in the table twice"
    keyed = {r["_kafka_offset"]: {"k": r["k"], "v": r["v"]} for r in rows if r["k"] != "roll"}
    assert keyed == dict(kept)  # what the broker kept of the keys, at its offsets
    assert {r["_kafka_offset"] for r in rows if r["k"] == "roll"} <= set(rolls)
    assert rolls[-1] in offsets  # the last record, never compacted away
    assert len(rows) < max(offsets) + 1  # gaps in the offsets: the stream read a compacted log


@pytest.mark.parametrize("source", SOURCES_PYTHON_IN_FULL)
def test_a_partition_added_between_runs_is_read_from_its_start(
    spark: Any, apache_kafka: KafkaBroker, source: str, tmp_path: Path, metrics_exports: None
) -> None:
    require_source(source)
    topic = f"growing-{source}-{os.getpid()}"
    apache_kafka.create_topic(topic, 2)
    apache_kafka.produce(topic, [(i % 2, None, json.dumps({"n": i}).encode()) for i in range(2_000)])
    data = job_config(apache_kafka.bootstrap_servers, topic, tmp_path, "e2e.growing", 800, source)
    config = validate(data)
    assert run(config, spark) == 0  # the query's checkpoint knows partitions 0 and 1

    apache_kafka.add_partitions(topic, 3)
    more = [(i % 3, None, json.dumps({"n": i}).encode()) for i in range(2_000, 3_500)]
    apache_kafka.produce(topic, more)
    assert run(config, spark) == 0  # resumes from the checkpoint and finds partition 2

    rows = read_table(tmp_path, data, "e2e.growing")
    assert sorted(r["n"] for r in rows) == list(range(3_500))
    new_partition = sorted(r["_kafka_offset"] for r in rows if r["_kafka_partition"] == 2)
    assert new_partition == list(range(500))
