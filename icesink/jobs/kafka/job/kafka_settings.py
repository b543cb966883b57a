"""The job's ``kafka`` section: what to read, how, and how the clients authenticate.

:meth:`KafkaSettings.source_options` gives the options of Spark's Kafka source (``jvm``)
or of ``icesink-kafka`` (``python``): the keys of the file in the names each source takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, PositiveInt, SecretStr, field_validator, model_validator

from icesink.jobs.kafka.job.sections import Section, scalar
from icesink.jobs.kafka.source.kafka_options import DEFAULT_BROKER_TIMEOUT_MS

# One source task per core: each task pays a Kafka client, its first fetch and its file's
# close, and a second wave of tasks pays them again (benchmarks/README.md, "One source task
# per core"); packing keeps the tasks within one range's size of each other.
SOURCE_TASKS_PER_CORE = 1
SourceChoice = Literal["auto", "jvm", "python"]
Flavor = Literal["jvm", "python"]

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class KafkaSecurity(Section):
    """How the Kafka clients authenticate and encrypt (``kafka.security``).

    Attributes:
        protocol: ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``.
        sasl_mechanism: ``PLAIN``, ``SCRAM-SHA-256`` or ``SCRAM-SHA-512`` (SASL protocols).
        sasl_username: The SASL user.
        sasl_password: The SASL password (kept secret).
        ssl_ca_location: PEM file of the CA certificates that sign the brokers' certificates.
        ssl_certificate_location: PEM file of the client certificate (mutual TLS, Python source).
        ssl_key_location: PEM file of the client key (mutual TLS, Python source).
        ssl_key_password: Password of that key (kept secret).
    """

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: SecretStr | None = None

    @model_validator(mode="after")
    def _complete(self) -> KafkaSecurity:
        sasl = self.protocol.startswith("SASL")
        if sasl and not (self.sasl_mechanism and self.sasl_username and self.sasl_password):
            raise ValueError(
                f"protocol {self.protocol} needs sasl-mechanism, sasl-username and sasl-password"
            )
        if not sasl and (self.sasl_mechanism or self.sasl_username or self.sasl_password):
            raise ValueError(
                f"sasl-* keys need protocol SASL_PLAINTEXT or SASL_SSL (protocol is {self.protocol})"
            )
        return self

    def client_options(self, flavor: Flavor) -> dict[str, str]:
        """Client properties for the Python source (librdkafka names) or Spark's connector (Java names)."""
        options: dict[str, str] = {"security.protocol": self.protocol}
        password = self.sasl_password.get_secret_value() if self.sasl_password else None
        if flavor == "python":
            optional = {
                "sasl.mechanisms": self.sasl_mechanism,
                "sasl.username": self.sasl_username,
                "sasl.password": password,
                "ssl.ca.location": self.ssl_ca_location,
                "ssl.certificate.location": self.ssl_certificate_location,
                "ssl.key.location": self.ssl_key_location,
                "ssl.key.password": self.ssl_key_password.get_secret_value()
                if self.ssl_key_password
                else None,
            }
            options.update({k: v for k, v in optional.items() if v is not None})
            return options
        if self.sasl_mechanism:
            options["sasl.mechanism"] = self.sasl_mechanism
            options["sasl.jaas.config"] = (
                f'{_JAAS_MODULES[self.sasl_mechanism]} required username="{_jaas_quote(self.sasl_username)}" '
                f'password="{_jaas_quote(password)}";'
            )
        if self.ssl_ca_location:
            options.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ssl_ca_location})
        return options


class KafkaSettings(Section):
    """What to read and how (``kafka``); Spark's Kafka source option in brackets.

    Attributes:
        bootstrap_servers: ``host:port,...`` of the brokers (``kafka.bootstrap.servers``).
        topics: The topics (``subscribe``); a list or a comma-separated string.
        topic_pattern: A regular expression matched against whole topic names (``subscribePattern``).
        starting_offsets: ``earliest``, ``latest``, or per partition ``{"topic": {"0": 42}}``
            (-2 earliest, -1 latest) as a mapping or JSON (``startingOffsets``). Only for a
            new checkpoint: a restarted query goes on from its checkpoint.
        max_offsets_per_trigger: Most records per micro-batch (``maxOffsetsPerTrigger``).
        min_partitions: Least Spark partitions per micro-batch (``minPartitions``).
        max_partitions: Most Spark partitions per micro-batch of the Python source
            (``maxPartitions``): small offset ranges, such as one per topic of a pattern
            with hundreds of topics, are read together by one task. Default:
            :data:`SOURCE_TASKS_PER_CORE` per core of the session; Spark's connector
            (``jvm``) has no such option and reads one partition per topic-partition.
        fail_on_data_loss: Fail when records were deleted before being read (``failOnDataLoss``).
        broker_timeout_s: Python source: how long the driver's offset queries, and a task
            waiting for records, go without an answer from the brokers before the query fails
            with ``ICESINK-KAFKA-SOURCE`` naming them (``brokerTimeoutMs``,
            ``kafkaConsumer.pollTimeoutMs``), at start-up and mid-run alike, so that
            ``max-restarts`` applies. Default 30: a missing broker is reported within a minute.
        source: ``jvm``: Spark's Kafka connector (a session the job starts gets the jars
            ``make env`` fetched, :mod:`icesink.jobs.jvm_jars`, unless ``spark.jars`` or
            ``spark.jars.packages`` name one); ``python``: icesink's Python source;
            ``auto``: the connector when it is on the classpath, else the Python source.
        decode_in_source: With the Python source, decode the values inside the source's
            tasks (``icesink-kafka-decoded``), so that they cross to the JVM once, decoded;
            false: the source yields raw records and a pass of their own decodes them.
        write_in_source: Let the tasks that decode the values write them to the table too,
            when the sink allows it (:class:`icesink.sources.SourceWrite`): the rows then never cross
            to the JVM. False: every row goes through the sink's own write.
        security: Authentication and encryption.
        options: Other client properties, without the ``kafka.`` prefix, in the names of the
            client the source uses (librdkafka for ``python``, Java's for ``jvm``; there
            ``default.api.timeout.ms`` is 10000 unless set, so that unreachable brokers fail
            the query in under a minute: :mod:`icesink.jobs.kafka.jvm_source`).
    """

    bootstrap_servers: str = Field(min_length=1)
    topics: list[str] | None = None
    topic_pattern: str | None = None
    starting_offsets: str | dict[str, dict[str, int]] = "latest"
    max_offsets_per_trigger: PositiveInt | None = None
    min_partitions: PositiveInt | None = None
    max_partitions: PositiveInt | None = None
    fail_on_data_loss: bool = True
    broker_timeout_s: float = Field(default=DEFAULT_BROKER_TIMEOUT_MS / 1000, gt=0)
    source: SourceChoice = "auto"
    decode_in_source: bool = True
    write_in_source: bool = True
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    options: dict[str, str] = Field(default_factory=dict)

    @field_validator("topics", mode="before")
    @classmethod
    def _split_topics(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [t.strip() for t in value.split(",") if t.strip()]
        return value

    @field_validator("topics")
    @classmethod
    def _topic_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value:
                raise ValueError("no topic given")
            bad = [t for t in value if not _TOPIC.fullmatch(t)]
            if bad:
                raise ValueError(f"not valid topic names: {bad} (letters, digits, '.', '_', '-')")
        return value

    @field_validator("topic_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as e:
                raise ValueError(f"not a regular expression: {e}") from e
        return value

    @field_validator("starting_offsets", mode="before")
    @classmethod
    def _offsets(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return json.dumps({str(t): {str(p): o for p, o in parts.items()} for t, parts in value.items()})
        if isinstance(value, str) and value.strip().lower() in ("earliest", "latest"):
            return value.strip().lower()
        return value

    @field_validator("options", mode="before")
    @classmethod
    def _option_names(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            prefixed = [k for k in value if str(k).lower().startswith("kafka.")]
            if prefixed:
                raise ValueError(f"write client properties without the 'kafka.' prefix: {prefixed}")
            taken = [k for k in value if str(k).lower() in ("bootstrap.servers", "security.protocol")]
            if taken:
                raise ValueError(f"{taken} have keys of their own: bootstrap-servers, security.protocol")
            return {str(k): scalar(v) for k, v in value.items()}
        return value

    @model_validator(mode="after")
    def _one_subscription(self) -> KafkaSettings:
        if (self.topics is None) == (self.topic_pattern is None):
            raise ValueError("set exactly one of 'topics' and 'topic-pattern'")
        return self

    @model_validator(mode="after")
    def _partition_bounds(self) -> KafkaSettings:
        low, high = self.min_partitions, self.max_partitions
        if low is not None and high is not None and low > high:
            raise ValueError(f"min-partitions ({low}) is greater than max-partitions ({high})")
        if high is not None and self.source == "jvm":
            raise ValueError(
                f"max-partitions ({high}) applies to the Python source only; Spark's connector (source: jvm) "
                "reads one partition per topic-partition: remove max-partitions or set source: python"
            )
        return self

    def source_options(self, flavor: Flavor, cores: int | None = None) -> dict[str, str]:
        """The options of Spark's Kafka source (``jvm``) or of ``icesink-kafka`` (``python``).

        Args:
            flavor: Which source reads.
            cores: The session's cores (``defaultParallelism``): without ``max-partitions``,
                the Python source packs its ranges into :data:`SOURCE_TASKS_PER_CORE` tasks
                per core (never fewer than ``min-partitions``).
        """
        options = {"kafka.bootstrap.servers": self.bootstrap_servers}
        if self.topics is not None:
            options["subscribe"] = ",".join(self.topics)
        else:
            options["subscribePattern"] = str(self.topic_pattern)
        options["startingOffsets"] = str(self.starting_offsets)
        options["failOnDataLoss"] = str(self.fail_on_data_loss).lower()
        if self.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        if self.min_partitions is not None:
            options["minPartitions"] = str(self.min_partitions)
        if flavor == "python":
            most = self.max_partitions
            if most is None and cores is not None:
                most = max(SOURCE_TASKS_PER_CORE * cores, self.min_partitions or 1)
            if most is not None:
                options["maxPartitions"] = str(most)
            timeout_ms = str(max(round(self.broker_timeout_s * 1000), 1))
            options.update({"brokerTimeoutMs": timeout_ms, "kafkaConsumer.pollTimeoutMs": timeout_ms})
        client = {**self.security.client_options(flavor), **self.options}
        options.update({f"kafka.{k}": v for k, v in client.items()})
        return options


def _jaas_quote(text: str | None) -> str:
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')
