"""Configuration of the Kafka-to-Iceberg job: a YAML file and/or flags, validated before Spark starts.

A complete file (every key but ``kafka.bootstrap-servers``, one of ``kafka.topics`` /
``kafka.topic-pattern``, ``sink.table`` (or the routing keys ``sink.route.*``, see
:mod:`streaming_jobs.kafka_routing`) and ``checkpoint-location`` has a default)::

    kafka:
      bootstrap-servers: broker1:9092,broker2:9092
      topics: [orders]                 # or topic-pattern: "orders\\..*"
      starting-offsets: earliest       # latest (default), or {"orders": {"0": 42, "1": -2}}
      max-offsets-per-trigger: 500000
      min-partitions: 8
      max-partitions: 16               # Python source only; default: 1 per core of the session
      fail-on-data-loss: true
      broker-timeout-s: 30             # Python source: no broker answer for this long fails the query
      source: auto                     # jvm (Spark's connector), python (icesink-kafka), auto
      decode-in-source: true           # python: values decoded where they are read
      write-in-source: true            # and written to the table there, when the table allows
      security:
        protocol: SASL_SSL
        sasl-mechanism: SCRAM-SHA-512
        sasl-username: ingest
        sasl-password: ...
        ssl-ca-location: /etc/ssl/kafka-ca.pem
      options: {}                      # other client properties (librdkafka's or Java's names)
    value:
      format: json                     # or debezium-json
      schema: "id BIGINT, name STRING" # fixed; inferred per batch when absent
      metadata-columns: true           # _kafka_topic, _kafka_partition, _kafka_offset, _kafka_timestamp
                                       # (default true; false with sink write.mode: upsert)
    sink:                              # every IcebergSink option (docs/options.md)
      table: analytics.orders          # or route.by: topic, route.table-template: raw.{topic}
      catalog.type: sql
      catalog.uri: sqlite:////data/catalog.db
      catalog.warehouse: file:///data/warehouse
      metrics.port: 9408               # the default here; null turns the endpoint off
    trigger:
      interval: 30 seconds             # or available-now: true
    checkpoint-location: /data/checkpoints/orders
    query-name: orders-to-iceberg
    max-restarts: 3                    # a failed query starts again from its checkpoint (default 0)
    spark:
      master: local[*]
      conf: {spark.sql.shuffle.partitions: "8"}

The file and the flags are read by :func:`streaming_jobs.kafka_cli.load_config` (flags
win); :func:`validate` checks the result. Any error names the key, the value and what
is accepted, and is raised as :class:`~sink.errors.ConfigError` before a SparkSession
exists. A value may refer to an environment variable, ``${env:NAME}``
(:mod:`streaming_jobs.config_env`): credentials need not be in the file nor on the command line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from icesink import ConfigError, SinkConfig
from sink.secrets import hidden
from streaming_jobs.config_env import expand_env
from streaming_jobs.kafka.decode import DdlError, DecodeOptions, ValueFormat, parse_ddl
from streaming_jobs.kafka.decode.debezium import SOURCE_TS_COLUMN
from streaming_jobs.kafka.source.kafka_errors import require_client
from streaming_jobs.kafka.source.kafka_options import (
    DEFAULT_BROKER_TIMEOUT_MS,
    KafkaSourceOptions,
    check_client_config,
)
from streaming_jobs.kafka_routing import check_routing, upserted_tables

DEFAULT_METRICS_PORT = 9408  # what monitoring/prometheus/prometheus.yml scrapes
DEFAULT_APP_NAME = "icesink-kafka-to-iceberg"
# One source task per core: each task pays a Kafka client, its first fetch and its file's
# close, and a second wave of tasks pays them again (benchmarks/README.md, "One source task
# per core"); packing keeps the tasks within one range's size of each other.
SOURCE_TASKS_PER_CORE = 1
SourceChoice = Literal["auto", "jvm", "python"]
Flavor = Literal["jvm", "python"]

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_INTERVAL = re.compile(
    r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|millis|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\s*$",
    re.IGNORECASE,
)
# Spark Kafka source option -> the key of this file, for messages.
_OPTION_KEYS = {
    "kafka.bootstrap.servers": "kafka.bootstrap-servers",
    "subscribe": "kafka.topics",
    "subscribePattern": "kafka.topic-pattern",
    "startingOffsets": "kafka.starting-offsets",
    "maxOffsetsPerTrigger": "kafka.max-offsets-per-trigger",
    "minPartitions": "kafka.min-partitions",
    "maxPartitions": "kafka.max-partitions",
    "failOnDataLoss": "kafka.fail-on-data-loss",
    "brokerTimeoutMs": "kafka.broker-timeout-s",
}
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=_kebab, populate_by_name=False)


class KafkaSecurity(_Section):
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


class KafkaSettings(_Section):
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
            ``make env`` fetched, :mod:`streaming_jobs.jvm_jars`, unless ``spark.jars`` or
            ``spark.jars.packages`` name one); ``python``: icesink's Python source;
            ``auto``: the connector when it is on the classpath, else the Python source.
        decode_in_source: With the Python source, decode the values inside the source's
            tasks (``icesink-kafka-decoded``), so that they cross to the JVM once, decoded;
            false: the source yields raw records and a pass of their own decodes them.
        write_in_source: Let the tasks that decode the values write them to the table too,
            when the sink allows it (:mod:`sink.batch.source_write`): the rows then never cross
            to the JVM. False: every row goes through the sink's own write.
        security: Authentication and encryption.
        options: Other client properties, without the ``kafka.`` prefix, in the names of the
            client the source uses (librdkafka for ``python``, Java's for ``jvm``; there
            ``default.api.timeout.ms`` is 10000 unless set, so that unreachable brokers fail
            the query in under a minute: :mod:`streaming_jobs.kafka.jvm_source`).
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


class ValueSettings(_Section):
    """How the Kafka values are decoded (``value``).

    Attributes:
        format: ``json`` or ``debezium-json``.
        schema_ddl: A fixed schema as a Spark DDL string (``schema``); absent: inferred per batch.
        metadata_columns: Add the ``_kafka_*`` columns to every row (default: true, but
            false when the sink upserts without routing by topic, unless set).
    """

    format: ValueFormat = ValueFormat.JSON
    schema_ddl: str | None = Field(default=None, alias="schema")
    metadata_columns: bool = True

    @field_validator("schema_ddl")
    @classmethod
    def _ddl(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_ddl(value)
            except DdlError as e:
                raise ValueError(f"not a Spark DDL schema: {e}") from e
        return value

    def decode_options(self) -> DecodeOptions:
        """The decoder's options."""
        fixed = parse_ddl(self.schema_ddl) if self.schema_ddl is not None else None
        return DecodeOptions(format=self.format, fixed_schema=fixed, metadata_columns=self.metadata_columns)


class TriggerSettings(_Section):
    """When micro-batches run (``trigger``); neither key: one after the other, as fast as possible.

    Attributes:
        interval: Processing-time interval, e.g. ``30 seconds``, ``500 ms``, ``1 minute``.
        available_now: Read what is there now, in micro-batches, then stop.
    """

    interval: str | None = None
    available_now: bool = False

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: str | None) -> str | None:
        if value is None:
            return value
        match = _INTERVAL.match(value)
        if match is None:
            raise ValueError("not an interval; use e.g. '30 seconds', '500 ms', '1 minute'")
        return f"{round(float(match['n']) * _unit_ms(match['unit'].lower()))} milliseconds"

    @model_validator(mode="after")
    def _one_kind(self) -> TriggerSettings:
        if self.interval is not None and self.available_now:
            raise ValueError("set either 'interval' or 'available-now', not both")
        return self


class SparkSettings(_Section):
    """The SparkSession the job creates (``spark``); ``spark-submit`` settings win.

    Attributes:
        master: ``local[*]`` by default when not submitted.
        app_name: The application name.
        conf: Spark configuration, e.g. ``spark.jars.packages`` for the Kafka connector.
    """

    master: str | None = None
    app_name: str = DEFAULT_APP_NAME
    conf: dict[str, str] = Field(default_factory=dict)

    @field_validator("conf", mode="before")
    @classmethod
    def _strings(cls, value: Any) -> Any:
        return {str(k): scalar(v) for k, v in value.items()} if isinstance(value, Mapping) else value


class JobConfig(_Section):
    """The whole job: source, decoding, sink, trigger, checkpoint (see the module docstring).

    Attributes:
        kafka: What to read and how.
        value: How the values are decoded.
        sink: Every sink option (``table``, ``catalog.*``, ...) as a mapping; ``table`` or the
            ``route.*`` keys are required. The job's own defaults: ``metrics.port`` 9408 (null
            turns the endpoint off); ``schema.evolution`` ``off`` with a fixed value schema;
            ``upsert.order-column`` ``_source_ts`` when upserting Debezium values.
        trigger: When micro-batches run.
        checkpoint_location: The streaming query's checkpoint, on storage every restart of the
            driver sees.
        query_name: The streaming query's name, as Spark shows it.
        max_restarts: How many times a failed query starts again from its checkpoint (after 1,
            2, 4, ... up to 30 seconds) before the job exits with code 1.
        spark: The SparkSession the job creates.
    """

    kafka: KafkaSettings
    value: ValueSettings = Field(default_factory=ValueSettings)
    sink: dict[str, str | None]
    trigger: TriggerSettings = Field(default_factory=TriggerSettings)
    checkpoint_location: str = Field(min_length=1)
    query_name: str | None = None
    max_restarts: int = Field(default=0, ge=0)
    spark: SparkSettings = Field(default_factory=SparkSettings)

    @model_validator(mode="before")
    @classmethod
    def _no_metadata_columns_when_upserting(cls, data: Any) -> Any:
        """Upserting, ``value.metadata-columns`` is false unless set (a row is a key's state).

        Routing by topic keeps them: the topic column names each row's table.
        """
        if not isinstance(data, Mapping) or not isinstance(data.get("sink"), Mapping):
            return data
        sink = {str(k).strip().lower(): v for k, v in data["sink"].items()}
        value = data.get("value") or {}
        if str(sink.get("write.mode") or "").strip().lower() != "upsert" or not isinstance(value, Mapping):
            return data
        if "metadata-columns" in value or str(sink.get("route.by") or "").strip().lower() == "topic":
            return data
        return {**data, "value": {**value, "metadata-columns": False}}

    def __repr_args__(self) -> Any:
        """The fields, with the sink's credentials masked as the sink itself shows them."""
        for name, value in super().__repr_args__():
            if name == "sink" and isinstance(value, Mapping):
                yield name, {k: v if v is None else hidden(k, v) for k, v in value.items()}
            else:
                yield name, value

    @field_validator("sink", mode="before")
    @classmethod
    def _sink_strings(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): None if v is None else scalar(v) for k, v in value.items()}
        return value

    def sink_options(self) -> dict[str, str | None]:
        """The IcebergSink options, with the job's defaults.

        ``metrics.port`` is 9408 unless set (``null`` turns it off); with a fixed value
        schema, ``schema.evolution`` is ``off`` unless set; upserting Debezium events,
        ``upsert.order-column`` is ``_source_ts`` unless set (the change's time in the
        source database orders the changes of one key within a batch). A routed job's
        upsert keys apply to each routed table (:func:`~streaming_jobs.kafka_routing.upserted_tables`).
        """
        options = upserted_tables(self.sink)
        given = {k.strip().lower() for k in options}
        if "metrics.port" not in given:
            options["metrics.port"] = str(DEFAULT_METRICS_PORT)
        if self.value.schema_ddl is not None and "schema.evolution" not in given:
            options["schema.evolution"] = "off"
        lowered = {k.strip().lower(): v for k, v in self.sink.items()}
        upsert = str(lowered.get("write.mode") or "").strip().lower() == "upsert"
        if upsert and self.value.format is ValueFormat.DEBEZIUM_JSON and "upsert.order-column" not in given:
            options["upsert.order-column"] = SOURCE_TS_COLUMN
        return options


def validate(data: Mapping[str, Any]) -> JobConfig:
    """Validate a configuration mapping (the YAML file's content, flags applied).

    Raises:
        ConfigError: Naming the key, the value and what is accepted.
    """
    try:
        config = JobConfig.model_validate(expand_env(data))
    except ValidationError as e:
        raise _config_error(e) from e
    check_routing(config.sink, config.value.metadata_columns)
    _check_sink(config)
    if config.kafka.source != "jvm":
        _check_python_source(config)
    return config


def _config_error(error: ValidationError) -> ConfigError:
    lines = []
    for item in error.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(top level)"
        value = item.get("input")
        if item["type"] == "extra_forbidden":
            lines.append(f"unknown key {key!r}")
        elif item["type"] == "missing":
            lines.append(f"key {key!r} is required")
        else:
            message = str(item["msg"]).removeprefix("Value error, ")
            if isinstance(value, Mapping):  # a whole section: its values may be secrets
                lines.append(f"key {key!r}: {message}")
            else:
                lines.append(f"key {key!r} has value {_shown(key, value)}: {message}")
    return ConfigError(
        "invalid configuration: " + "; ".join(lines),
        hint="see the keys in docs/options.md, 'Kafka job options'",
    )


def _check_sink(config: JobConfig) -> None:
    try:
        SinkConfig.from_options(config.sink_options())
    except ConfigError as e:
        raise ConfigError(f"invalid configuration: sink: {e.message}", hint=e.hint) from e


def _check_python_source(config: JobConfig) -> None:
    require_client()  # without the kafka extra: an error naming it, not a key
    try:
        check_client_config(KafkaSourceOptions.from_options(config.kafka.source_options("python"), "stream"))
    except ConfigError as e:
        option = str(e.context.get("option", ""))
        key = _OPTION_KEYS.get(option) or _client_key(config.kafka, e.message)
        raise ConfigError(f"invalid configuration: key {key!r}: {e.message}", hint=e.hint) from e


def _client_key(kafka: KafkaSettings, message: str) -> str:
    """The key holding the client property librdkafka names in ``message``."""
    for name in sorted(kafka.options, key=len, reverse=True):
        if f'"{name}"' in message or f"{name} " in message:
            return f"kafka.options.{name}"
    for name in kafka.security.client_options("python"):
        if name in message:
            return "kafka.security"
    return "kafka.options"


def _shown(key: str, value: Any) -> str:
    if any(word in key for word in ("password", "secret")) or isinstance(hidden(key, str(value)), SecretStr):
        return "'**********'"
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "...'"


def scalar(value: Any) -> str:
    """A YAML scalar (or a nested value, as JSON) as the string Spark-style options take."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Mapping | list):
        return json.dumps(value)
    return str(value)


def _unit_ms(unit: str) -> int:
    if unit in ("ms", "millis") or unit.startswith("millisecond"):
        return 1
    if unit.startswith("s"):
        return 1000
    if unit.startswith("m"):
        return 60_000
    return 3_600_000


def _jaas_quote(text: str | None) -> str:
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')
