"""Kafka Connect standalone with Iceberg's Kafka Connect sink, for ``benchmarks/kafka_connect.py``.

The jars are those of ``jvm/kafka-connect/pom.xml`` (Kafka Connect's runtime and JSON
converter of the broker's Kafka version, Iceberg's sink of the Iceberg version the tests'
Iceberg Java uses, the SQLite JDBC driver, Hadoop's client for ``HadoopFileIO`` and Parquet):
:func:`fetch_connect_jars` copies them with ``mvn`` into a cache folder the first time
(:func:`icesink.jobs.fetch_jvm_jars.fetch`, which ``make env`` uses for the other poms), and
again only when the pom changes. They all go on one class path, and the worker finds the
connector and the converters through their service files (``plugin.discovery=service_load``:
scanning every class of about 100 jars costs the worker tens of CPU seconds at each start).

:class:`KafkaConnect` is one ``ConnectStandalone`` process running one Iceberg sink, started
as ``bin/connect-standalone.sh`` would start it (its heap and garbage collector settings),
writing through Iceberg's ``JdbcCatalog`` into the SQLite catalog and warehouse of
pyiceberg's SQL catalog that the icesink job writes, with its own control topic and
consumer group, so each run starts from the topic's first offsets. Its worker's
``offset.flush.interval.ms`` is the sink's commit interval: with Kafka Connect's default (60 s),
once the topic is read, the sink's tasks answer the coordinator's last commit only when that
long has passed.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from icesink.jobs.fetch_jvm_jars import fetch
from icesink.jobs.jvm_jars import jars_in
from icesink.jobs.local_servers.processes import ServerProcess, http_get, port_open

POM = Path(__file__).resolve().parents[1] / "jvm" / "kafka-connect" / "pom.xml"
CONNECTOR_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"
# bin/connect-standalone.sh's heap and kafka-run-class.sh's JVM settings.
JVM_OPTIONS = (
    "-Xms256M",
    "-Xmx2G",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
_LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
"""


def default_jars_folder() -> Path:
    """The cache folder of the jars: ``$XDG_CACHE_HOME/icesink/kafka-connect`` (``~/.cache`` by default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "icesink" / "kafka-connect"


def fetch_connect_jars(folder: Path) -> list[Path]:
    """The jars of ``jvm/kafka-connect/pom.xml`` in ``folder``, fetched with ``mvn`` unless there already."""
    fetch(POM, folder, {})
    return jars_in(folder)


@dataclass(frozen=True)
class IcebergSinkSettings:
    """One Iceberg sink connector: what it reads and where it writes.

    Attributes:
        name: The connector's name (its consumer group is ``connect-<name>``).
        topic: The topic it reads.
        table: The table it writes (created with the schema the first records give).
        control_topic: Its control topic, which must exist.
        catalog_name: The SQL catalog's name (pyiceberg's ``catalog_name`` column).
        catalog_file: The SQLite file of the catalog.
        warehouse: The warehouse folder.
        tasks: ``tasks.max``.
        commit_interval_ms: ``iceberg.control.commit.interval-ms``.
    """

    name: str
    topic: str
    table: str
    control_topic: str
    catalog_name: str
    catalog_file: Path
    warehouse: Path
    tasks: int
    commit_interval_ms: int

    def connector_properties(self) -> dict[str, str]:
        """The connector's configuration, as ``connect-standalone.sh``'s second file holds it."""
        return {
            "name": self.name,
            "connector.class": CONNECTOR_CLASS,
            "tasks.max": str(self.tasks),
            "topics": self.topic,
            "iceberg.tables": self.table,
            "iceberg.tables.auto-create-enabled": "true",
            "iceberg.catalog": self.catalog_name,
            "iceberg.catalog.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
            "iceberg.catalog.uri": f"jdbc:sqlite:{self.catalog_file}",
            "iceberg.catalog.warehouse": f"file://{self.warehouse}",
            "iceberg.control.topic": self.control_topic,
            "iceberg.control.commit.interval-ms": str(self.commit_interval_ms),
        }


class KafkaConnect(ServerProcess):
    """A Kafka Connect standalone worker running one Iceberg sink connector.

    Args:
        workdir: Folder for its configuration, its offsets file and its log.
        bootstrap_servers: The broker.
        jars: The class path (:func:`fetch_connect_jars`).
        sink: The connector.
    """

    name = "kafka-connect"
    port_names = ("rest",)
    start_timeout_s = 300.0  # a loaded machine: the JVM loads a hundred jars

    def __init__(
        self, workdir: Path, bootstrap_servers: str, jars: Sequence[Path], sink: IcebergSinkSettings
    ):
        super().__init__(workdir)
        self.bootstrap_servers = bootstrap_servers
        self.classpath = ":".join(str(j) for j in jars)
        self.sink = sink
        self.java = shutil.which("java") or "java"

    def _worker_properties(self) -> dict[str, str]:
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "offset.storage.file.filename": str(self.workdir / "connect.offsets"),
            # A sink task whose topic has nothing new is handed no records (and so sees no
            # control event: no commit) until its consumer's poll returns, after this long.
            "offset.flush.interval.ms": str(self.sink.commit_interval_ms),
            "listeners": f"http://127.0.0.1:{self.port}",
            "plugin.discovery": "service_load",
        }

    def _prepare(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name, properties in (
            ("worker.properties", self._worker_properties()),
            ("connector.properties", self.sink.connector_properties()),
        ):
            (self.workdir / name).write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        (self.workdir / "log4j2.properties").write_text(_LOG4J)

    def _command(self) -> Sequence[str]:
        log4j = f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}"
        main = "org.apache.kafka.connect.cli.ConnectStandalone"
        files = [str(self.workdir / "worker.properties"), str(self.workdir / "connector.properties")]
        return [self.java, *JVM_OPTIONS, log4j, "-cp", self.classpath, main, *files]

    def _ready(self) -> bool:
        return port_open(self.port)

    def failure(self) -> str | None:
        """Why the connector or one of its tasks failed, or ``None`` while they run (or are starting)."""
        try:
            status = json.loads(http_get(f"{self.url}/connectors/{self.sink.name}/status"))
        except (OSError, urllib.error.URLError, ValueError):  # not created yet
            return None
        for part in [status.get("connector", {}), *status.get("tasks", [])]:
            if part.get("state") == "FAILED":
                return str(part.get("trace", "FAILED"))[:2000]
        return None
