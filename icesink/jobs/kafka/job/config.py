"""Configuration of the Kafka-to-Iceberg job: a YAML file and/or flags, validated before Spark starts.

A complete file (every key but ``kafka.bootstrap-servers``, one of ``kafka.topics`` /
``kafka.topic-pattern``, ``sink.table`` (or the routing keys ``icesink.route.*``, see
:mod:`icesink.jobs.kafka.job.routing`) and ``checkpoint-location`` has a default)::

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
      format: json                     # or debezium-json, avro, debezium-avro, json-schema, protobuf
      schema-registry:                 # for avro, debezium-avro, json-schema and protobuf values
        url: http://registry:8081      # Confluent-compatible API (Apicurio: .../apis/ccompat/v7)
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

The file and the flags are read by :func:`icesink.jobs.kafka.job.cli.load_config` (flags
win); :func:`icesink.jobs.kafka.job.validate.validate` checks the result. Any error names
the key, the value and what is accepted, and is raised as :class:`~icesink.ConfigError`
before a SparkSession exists. A value may refer to an environment variable, ``${env:NAME}``
(:mod:`icesink.jobs.config_env`): credentials need not be in the file nor on the command line.
The ``kafka`` section is :mod:`icesink.jobs.kafka.job.kafka_settings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator

from icesink import hidden
from icesink.jobs.kafka.decode import DdlError, DecodeOptions, ValueFormat, parse_ddl
from icesink.jobs.kafka.decode.debezium import SOURCE_TS_COLUMN
from icesink.jobs.kafka.decode.registry import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S, SchemaRegistry
from icesink.jobs.kafka.job.kafka_settings import KafkaSettings
from icesink.jobs.kafka.job.routing import upserted_tables
from icesink.jobs.kafka.job.sections import Section, scalar

DEFAULT_METRICS_PORT = 9408  # what monitoring/prometheus/prometheus.yml scrapes
DEFAULT_APP_NAME = "icesink-kafka-to-iceberg"
_INTERVAL = re.compile(
    r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|millis|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)\s*$",
    re.IGNORECASE,
)


class SchemaRegistrySettings(Section):
    """The schema registry of framed values (``value.schema-registry``).

    Attributes:
        url: The root of the registry's Confluent-compatible REST API: Confluent Schema
            Registry's or Karapace's root (``http://registry:8081``), Apicurio Registry's
            ``http://apicurio:8080/apis/ccompat/v7``. Schemas are read by id
            (``GET <url>/schemas/ids/<id>``) and kept for the life of the job.
        timeout_s: The longest wait for one answer of the registry: a silent or failing
            registry fails the batch with ``ICESINK-SCHEMA-REGISTRY`` (and ``max-restarts``
            applies) after ``max-retries`` more tries, it never hangs the query.
        max_retries: Further tries of a request that timed out or got a retriable answer
            (HTTP 5xx, 429), after a backoff of up to 1 s, 2 s, 4 s, ...: the longest wait for
            one schema is about ``(max-retries + 1) x timeout-s`` plus the backoff.
        basic_auth_user: Basic authentication's user, if the registry wants one.
        basic_auth_password: Basic authentication's password (``${env:NAME}`` keeps it out
            of the file).
    """

    url: str = Field(min_length=1)
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    basic_auth_user: str | None = None
    basic_auth_password: SecretStr = SecretStr("")

    @field_validator("url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("not an http:// or https:// URL; use e.g. http://registry:8081")
        return value

    def registry(self) -> SchemaRegistry:
        """The registry client."""
        return SchemaRegistry(
            self.url,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
            username=self.basic_auth_user,
            password=self.basic_auth_password.get_secret_value(),
        )


class ValueSettings(Section):
    """How the Kafka values are decoded (``value``).

    Attributes:
        format: ``json``, ``debezium-json``, or values framed for a schema registry
            (Confluent's wire format: magic byte 0, the 4-byte schema id, the value): ``avro``,
            ``debezium-avro`` (Debezium's Avro converter), ``json-schema``, ``protobuf`` (after
            the schema id, Confluent's message indexes; the ``.proto`` schemas are compiled
            with protoc, with the schemas they reference). A value that is not framed, names a
            schema id the registry does not hold, or does not match its schema becomes a dead
            letter with the reason.
        schema_ddl: A fixed schema as a Spark DDL string (``schema``); absent: inferred per batch.
        metadata_columns: Add the ``_kafka_*`` columns to every row (default: true, but
            false when the sink upserts without routing by topic, unless set).
        schema_registry: The schema registry, for ``avro``, ``debezium-avro``, ``json-schema``
            and ``protobuf``.
    """

    format: ValueFormat = ValueFormat.JSON
    schema_ddl: str | None = Field(default=None, alias="schema")
    metadata_columns: bool = True
    schema_registry: SchemaRegistrySettings | None = None

    @model_validator(mode="after")
    def _registry_when_framed(self) -> ValueSettings:
        if self.format.framed and self.schema_registry is None:
            raise ValueError(
                f"format {self.format.value!r} needs schema-registry.url (a Confluent-compatible API)"
            )
        return self

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
        registry = self.schema_registry.registry() if self.schema_registry is not None else None
        return DecodeOptions(
            format=self.format, fixed_schema=fixed, metadata_columns=self.metadata_columns, registry=registry
        )


class TriggerSettings(Section):
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


class SparkSettings(Section):
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


class JobConfig(Section):
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
        upsert keys apply to each routed table (:func:`~icesink.jobs.kafka.job.routing.upserted_tables`).
        """
        options = upserted_tables(self.sink)
        given = {k.strip().lower() for k in options}
        if "metrics.port" not in given:
            options["metrics.port"] = str(DEFAULT_METRICS_PORT)
        if self.value.schema_ddl is not None and "schema.evolution" not in given:
            options["schema.evolution"] = "off"
        lowered = {k.strip().lower(): v for k, v in self.sink.items()}
        upsert = str(lowered.get("write.mode") or "").strip().lower() == "upsert"
        if upsert and self.value.format.debezium and "upsert.order-column" not in given:
            options["upsert.order-column"] = SOURCE_TS_COLUMN
        return options


def _unit_ms(unit: str) -> int:
    if unit in ("ms", "millis") or unit.startswith("millisecond"):
        return 1
    if unit.startswith("s"):
        return 1000
    if unit.startswith("m"):
        return 60_000
    return 3_600_000
