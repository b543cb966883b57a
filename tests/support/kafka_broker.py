"""Apache Kafka for tests (:mod:`icesink.jobs.local_servers.kafka`); a test without its jars skips.

A test without the jars ``make env`` fetches skips (fails in CI). Beyond the server's own
topics and producer, tests grow and delete topics, delete a partition's first records
(DeleteRecords, which moves its low watermark as retention does), ask for its watermarks,
read a partition back as the broker holds it, and produce in transactions: committed,
aborted, or left open while the test reads.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from icesink.jobs.jvm_jars import kafka_broker_folder
from icesink.jobs.local_servers import kafka
from icesink.jobs.local_servers.kafka import REQUEST_TIMEOUT_S, Record

__all__ = ["REQUEST_TIMEOUT_S", "KafkaBroker", "Record"]


def kafka_classpath() -> str:
    """The class path of Apache Kafka's jars; skips the test when ``make env`` did not fetch them."""
    try:
        return kafka.kafka_classpath()
    except RuntimeError:
        message = f"Apache Kafka's jars are not in {kafka_broker_folder()}; make env fetches them"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


class KafkaBroker(kafka.KafkaBroker):
    """:class:`icesink.jobs.local_servers.kafka.KafkaBroker` with the tests' own requests.

    Args:
        workdir: Folder for the configuration, the log folder and the process's output.
    """

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, kafka_classpath())

    def add_partitions(self, name: str, total: int) -> None:
        """Grow topic ``name`` to ``total`` partitions (its records stay where they are)."""
        self.admin().create_partitions([NewPartitions(name, total)])[name].result(REQUEST_TIMEOUT_S)

    def delete_topic(self, name: str) -> None:
        """Delete topic ``name``; returns once a topic of that name can be created again."""
        self.admin().delete_topics([name])[name].result(REQUEST_TIMEOUT_S)
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while name in self.admin().list_topics(timeout=REQUEST_TIMEOUT_S).topics:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} still listed {REQUEST_TIMEOUT_S} s after its deletion")
            time.sleep(0.05)
        # The controller may still be removing the topic's log: probe with a dry run.
        while True:
            probe = self.admin().create_topics([NewTopic(name, 1, 1)], validate_only=True)[name]
            try:
                probe.result(REQUEST_TIMEOUT_S)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def delete_records(self, topic: str, partition: int, before: int) -> int:
        """Delete a partition's records below offset ``before`` (DeleteRecords); its new low watermark."""
        future = self.admin().delete_records([TopicPartition(topic, partition, before)])
        deleted = next(iter(future.values())).result(REQUEST_TIMEOUT_S)
        return int(deleted.low_watermark)

    def watermarks(self, topic: str, partition: int, *, committed: bool = False) -> tuple[int, int]:
        """The (low, high) watermarks of a partition; ``committed``: the last stable offset as high."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": "test-support",
                "isolation.level": "read_committed" if committed else "read_uncommitted",
            }
        )
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), REQUEST_TIMEOUT_S)
            return int(low), int(high)
        finally:
            consumer.close()

    def read_partition(self, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """Every record the partition holds now, as (offset, key, value), up to its high watermark."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": "test-support",
                "enable.auto.commit": False,
            }
        )
        records: list[tuple[int, bytes | None, bytes | None]] = []
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), REQUEST_TIMEOUT_S)
            consumer.assign([TopicPartition(topic, partition, 0)])
            position, deadline = 0, time.monotonic() + REQUEST_TIMEOUT_S
            while position < high:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{topic}-{partition}: not read past {position} of {high} in {REQUEST_TIMEOUT_S} s"
                    )
                for m in consumer.consume(10_000, timeout=0.2):  # what came within 0.2 s
                    if m.error() is not None:
                        raise KafkaException(m.error())
                    offset = int(m.offset() or 0)
                    records.append((offset, m.key(), m.value()))
                    position = offset + 1
        finally:
            consumer.close()
        return records

    def _in_transaction(self, topic: str, records: Iterable[Record], transactional_id: str) -> Producer:
        """A producer of ``transactional_id`` with ``records`` produced in its transaction, still open."""
        producer = Producer(
            {"bootstrap.servers": self.bootstrap_servers, "transactional.id": transactional_id}
        )
        producer.init_transactions(REQUEST_TIMEOUT_S)
        producer.begin_transaction()
        for partition, key, value in records:
            producer.produce(topic, value=value, key=key, partition=-1 if partition is None else partition)
        return producer

    def produce_transaction(
        self, topic: str, records: Iterable[Record], transactional_id: str, *, commit: bool
    ) -> None:
        """Produce ``records`` in one transaction, then commit it or abort it."""
        producer = self._in_transaction(topic, records, transactional_id)
        if commit:
            producer.commit_transaction(REQUEST_TIMEOUT_S)
        else:
            producer.flush(REQUEST_TIMEOUT_S)  # the records are in the log, then marked aborted
            producer.abort_transaction(REQUEST_TIMEOUT_S)

    @contextlib.contextmanager
    def open_transaction(
        self, topic: str, records: Iterable[Record], transactional_id: str
    ) -> Iterator[None]:
        """Produce ``records`` in a transaction left open (in the log, undecided) until the block ends.

        The transaction is committed when the block ends, aborted if it raises.
        """
        producer = self._in_transaction(topic, records, transactional_id)
        producer.flush(REQUEST_TIMEOUT_S)
        try:
            yield
        except BaseException:
            producer.abort_transaction(REQUEST_TIMEOUT_S)
            raise
        producer.commit_transaction(REQUEST_TIMEOUT_S)
