"""Apache Kafka on loopback: one KRaft broker-and-controller process on 127.0.0.1.

The jars are Apache Kafka's own (``kafka_2.13`` and its dependencies), fetched by ``make
env`` into :func:`icesink.jobs.jvm_jars.kafka_broker_folder`. Each start formats a fresh
log folder (``kafka.tools.StorageTool format``, as ``kafka-storage.sh format`` does) and
runs ``kafka.Kafka`` with one node that is both broker and controller, on two free ports;
:meth:`KafkaBroker.restart` starts it again on the same ports with the same log folder, its
records kept. The process is a :class:`~icesink.jobs.local_servers.processes.ServerProcess`:
stopped at the end, and killed by the kernel if the process that started it dies first.
Topics are created and records produced with confluent-kafka. The log cleaner looks for
work every 100 ms (Kafka's default: 15 s), so a compacted topic whose segments roll soon
(``segment.ms``) is compacted at once. ``make demo-kafka`` and the tests use it
(``tests/support/kafka_broker.py``).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from icesink.jobs.jvm_jars import jars_in, kafka_broker_folder
from icesink.jobs.local_servers.processes import ServerProcess, port_open

REQUEST_TIMEOUT_S = 30.0
HEAP = "-Xmx512m"
Record = tuple[int | None, bytes | None, bytes | None]
"""(partition, key, value); ``None`` partition: the producer's partitioner chooses."""

_LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
"""


def kafka_classpath() -> str:
    """The class path of Apache Kafka's jars.

    Raises:
        RuntimeError: ``make env`` did not fetch them.
    """
    jars = jars_in(kafka_broker_folder())
    if not jars:
        raise RuntimeError(f"Apache Kafka's jars are not in {kafka_broker_folder()}; make env fetches them")
    return ":".join(str(j) for j in jars)


class KafkaBroker(ServerProcess):
    """One Apache Kafka node (broker and KRaft controller) with its log folder under ``workdir``.

    Args:
        workdir: Folder for the configuration, the log folder and the process's output.
        classpath: Apache Kafka's jars; by default those ``make env`` fetched.
    """

    name = "kafka"
    port_names = ("broker", "controller")

    def __init__(self, workdir: Path, classpath: str | None = None) -> None:
        super().__init__(workdir)
        self.classpath = classpath or kafka_classpath()
        self.java = shutil.which("java") or "java"
        self._admin: AdminClient | None = None
        self._kept_ports: dict[str, int] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the broker's listener."""
        return f"127.0.0.1:{self.port}"

    def _properties(self) -> dict[str, str]:
        broker, controller = self.ports["broker"], self.ports["controller"]
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{broker},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{broker}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.workdir / "logs"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",  # Kafka's 50 make the first transaction slow
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            "log.cleaner.backoff.ms": "100",
        }

    def _prepare(self) -> None:
        """Write the configuration for this attempt's ports and format a fresh log folder.

        On a restart, the ports and the log folder of the previous start instead.
        """
        if self._kept_ports is not None:
            self.ports, self._kept_ports = self._kept_ports, None
            (self.workdir / "server.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in self._properties().items())
            )
            return
        shutil.rmtree(self.workdir / "logs", ignore_errors=True)
        config = self.workdir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J)
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # "=": an id may start with "-", which would otherwise be taken for an option
        format_command = [*self._java(), "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}"]
        done = subprocess.run(
            [*format_command, f"--config={config}"], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"formatting Kafka's log folder failed:\n{done.stdout}{done.stderr}")

    def _java(self) -> list[str]:
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}"
        return [self.java, HEAP, "-XX:+UseSerialGC", "-Xshare:auto", log4j, "-cp", self.classpath]

    def _command(self) -> Sequence[str]:
        return [*self._java(), "kafka.Kafka", str(self.workdir / "server.properties")]

    def _ready(self) -> bool:
        if not port_open(self.port):
            return False
        brokers = AdminClient({"bootstrap.servers": self.bootstrap_servers}).list_topics(timeout=5).brokers
        return bool(brokers)

    def stop(self) -> None:
        """Stop the broker (safe twice)."""
        self._admin = None
        super().stop()

    def restart(self) -> None:
        """Stop the broker and start it again on the same ports, its records kept."""
        ports = dict(self.ports)
        self.stop()
        self._kept_ports = ports
        self.start(attempts=1)

    def admin(self) -> AdminClient:
        """An admin client of this broker."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        return self._admin

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None) -> None:
        """Create a topic; returns once the controller has it."""
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
        self.admin().create_topics([topic])[name].result(REQUEST_TIMEOUT_S)

    def produce(self, topic: str, records: Iterable[Record], *, linger_ms: int = 5) -> list[tuple[int, int]]:
        """Produce ``records`` and wait until all are acknowledged; their (partition, offset) in order."""
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "linger.ms": linger_ms,
                "enable.idempotence": True,  # in order, once, whatever the retries
            }
        )
        delivered: dict[int, tuple[int, int]] = {}
        errors: list[str] = []

        def report(index: int) -> Any:
            def on_delivery(error: KafkaError | None, message: Any) -> None:
                if error is not None:
                    errors.append(str(error))
                else:
                    delivered[index] = (message.partition(), message.offset())

            return on_delivery

        count = 0
        for count, (partition, key, value) in enumerate(records, start=1):
            chosen = -1 if partition is None else partition  # -1: the partitioner chooses
            while True:
                try:
                    producer.produce(topic, value=value, key=key, partition=chosen, on_delivery=report(count))
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
            producer.poll(0)
        if producer.flush(REQUEST_TIMEOUT_S * 3) or errors or len(delivered) != count:
            raise RuntimeError(
                f"producing to {topic} failed: {errors[:3]}, {len(delivered)} of {count} delivered"
            )
        return [delivered[i] for i in range(1, count + 1)]
