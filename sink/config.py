"""Sink configuration: a frozen, validated pydantic model tree.

Two ways in: ``SinkConfig(...)`` with typed values, or :meth:`SinkConfig.from_options`
with Spark-style string options (case-insensitive keys), for example::

    SinkConfig.from_options({
        "table": "analytics.trips",
        "catalog.type": "sql",
        "catalog.uri": "sqlite:////data/catalog.db",
        "catalog.warehouse": "file:///data/warehouse",
        "partition-by": "day(tpep_pickup_datetime), bucket(16, PULocationID)",
        "write.target-file-size-bytes": "268435456",
    })

Every bad value fails here, at construction, with the key, the value and what would
be accepted, never in the middle of a stream.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pyiceberg.transforms import BucketTransform

from sink.config_options import option_tree
from sink.config_route import RouteConfig, check_route
from sink.config_upsert import UpsertConfig, check_upsert
from sink.errors import ConfigError, PartitionSpecError
from sink.partitioning import check_terms, parse_partition_by
from sink.secrets import hidden, redact

DEFAULT_CATALOG_NAME = "default"
DEFAULT_TARGET_FILE_SIZE_BYTES = 512 * 1024 * 1024  # Iceberg's write.target-file-size-bytes default
DEFAULT_ROW_GROUP_SIZE_BYTES = 128 * 1024 * 1024  # Iceberg's write.parquet.row-group-size-bytes default
DEFAULT_MEMORY_BUDGET_BYTES = 512 * 1024 * 1024
DEFAULT_COMPRESSION_CODEC = "zstd"
DEFAULT_COMMIT_RETRIES = 8
DEFAULT_COMMIT_MIN_WAIT_MS = 100
DEFAULT_COMMIT_MAX_WAIT_MS = 10_000
DEFAULT_METRICS_HOST = "127.0.0.1"  # the metrics endpoint is local unless configured otherwise
DEFAULT_PUSHGATEWAY_JOB = "icesink"


class DistributionMode(StrEnum):
    """How rows are shuffled before writing (Iceberg Spark's ``distribution-mode``)."""

    BUCKET = "bucket"  # Spark partition id == Iceberg bucket id
    HASH = "hash"  # shuffle by the full partition tuple
    NONE = "none"  # no shuffle: each task writes what it holds


class SchemaEvolution(StrEnum):
    """What the sink may change in the table's schema (``schema.evolution``)."""

    ADD_COLUMNS_AND_WIDEN = "add-columns-and-widen"  # new optional columns, Iceberg's type promotions
    OFF = "off"  # never: values are converted to the table's types or dead-lettered


class BadRecordPolicy(StrEnum):
    """What happens to a row whose values cannot be converted (``on-bad-record``)."""

    DLQ = "dlq"  # to the dead-letter table; the stream goes on
    FAIL = "fail"  # the batch fails, naming the column, the value and this option


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CatalogConfig(_Frozen):
    """Which Iceberg catalog to use: every ``catalog.*`` option goes to pyiceberg's ``load_catalog``.

    Attributes:
        name: The catalog's name (``catalog.name``).
        properties: The other ``catalog.*`` options, ``type``/``uri``/``warehouse`` among them.
            Credentials are kept as ``SecretStr``.
    """

    name: str = DEFAULT_CATALOG_NAME
    properties: dict[str, str | SecretStr] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _hide_secrets(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        return {str(k): hidden(str(k), v) if isinstance(v, str) else v for k, v in value.items()}

    def redact(self, text: str) -> str:
        """``text`` (an error message, say) with every secret of these properties masked."""
        return redact(text, self.properties.values())

    def plain_properties(self) -> dict[str, str]:
        """The properties with secrets revealed, for pyiceberg."""
        return {
            k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in self.properties.items()
        }


class WriteConfig(_Frozen):
    """How data files are written (executor side)."""

    target_file_size_bytes: int = Field(default=DEFAULT_TARGET_FILE_SIZE_BYTES, ge=1024)
    row_group_size_bytes: int = Field(default=DEFAULT_ROW_GROUP_SIZE_BYTES, ge=1024)
    memory_budget_bytes: int = Field(default=DEFAULT_MEMORY_BUDGET_BYTES, ge=1024 * 1024)
    compression_codec: str = DEFAULT_COMPRESSION_CODEC
    distribution_mode: DistributionMode | None = None  # None: bucket when the spec has one, else hash

    @field_validator("compression_codec")
    @classmethod
    def _known_codec(cls, value: str) -> str:
        accepted = {"zstd", "snappy", "gzip", "lz4", "brotli", "none", "uncompressed"}
        if value.lower() not in accepted:
            raise ValueError(f"must be one of {sorted(accepted)}")
        return value.lower()


class CommitConfig(_Frozen):
    """How and when the driver commits."""

    retries: int = Field(default=DEFAULT_COMMIT_RETRIES, ge=0, le=100)
    min_wait_ms: int = Field(default=DEFAULT_COMMIT_MIN_WAIT_MS, ge=0)
    max_wait_ms: int = Field(default=DEFAULT_COMMIT_MAX_WAIT_MS, ge=0)
    # Commit cadence: unset means one commit per micro-batch (see sink.commit.policy).
    target_bytes: int | None = Field(default=None, ge=1)
    interval_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_batches: int | None = Field(default=None, ge=1)


class SchemaConfig(_Frozen):
    """How a batch's columns meet the table's schema.

    Attributes:
        evolution: Whether new columns are added and types widened (``schema.evolution``).
        case_sensitive: Whether column names must match in case (``schema.case-sensitive``).
    """

    evolution: SchemaEvolution = SchemaEvolution.ADD_COLUMNS_AND_WIDEN
    case_sensitive: bool = False


class DeadLetterConfig(_Frozen):
    """Rows that cannot be converted to the table's types.

    Attributes:
        on_bad_record: ``dlq`` (default) or ``fail`` (``on-bad-record``).
        table: The dead-letter table (``dead-letter.table``); default ``<table>__dlq``.
    """

    on_bad_record: BadRecordPolicy = BadRecordPolicy.DLQ
    table: str | None = None

    @field_validator("table")
    @classmethod
    def _qualified(cls, value: str | None) -> str | None:
        if value is not None:
            parts = value.split(".")
            if len(parts) < 2 or any(not p.strip() for p in parts):
                raise ValueError("must be a qualified identifier 'namespace.table', e.g. 'db.trips__dlq'")
        return value


class MetricsConfig(_Frozen):
    """Where the sink's Prometheus metrics go (see :mod:`sink.metrics_server`).

    Attributes:
        port: Port of the HTTP endpoint on the driver (``metrics.port``); ``None`` (the
            default, for library use) serves nothing, 0 any free port.
        host: Address the endpoint binds (``metrics.host``).
        pushgateway_url: Pushgateway to push to, for short jobs (``metrics.pushgateway-url``).
        pushgateway_job: ``job`` of the pushed group (``metrics.pushgateway-job``).
    """

    port: int | None = Field(default=None, ge=0, le=65535)
    host: str = Field(default=DEFAULT_METRICS_HOST, min_length=1)
    pushgateway_url: str | None = Field(default=None, pattern=r"^(https?://)?[^\s/:]+(:\d+)?(/\S*)?$")
    pushgateway_job: str = Field(default=DEFAULT_PUSHGATEWAY_JOB, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    max_tables: int = Field(default=1000, ge=1)  # tables with series of their own; the rest: "_other"


class SinkConfig(_Frozen):
    """Everything an :class:`~sink.sink.IcebergSink` needs.

    Attributes:
        table: Table identifier, ``namespace.name``; created when missing.
        catalog: The catalog to load.
        partition_by: Partition spec for a table the sink creates, e.g.
            ``"day(ts), bucket(16, id)"``. An existing table keeps its own spec.
        sink_id: Identity recorded with every commit for the replay check. Default:
            the streaming query's id, which is stable across restarts from one checkpoint.
        table_properties: Properties for a table the sink creates.
        write: Data file writing.
        commit: Commit retries.
        metrics: Prometheus endpoint and Pushgateway.
        table_schema: Column matching and schema evolution.
        dead_letter: Rows that cannot be converted.
        state_location: Where the sink keeps its attempt records and staged batches
            (``state-location``; see :mod:`sink.commit.state`), outside every table's location.
        upsert: Append or upsert (``write.mode``, ``upsert.*``).
        route: Many tables from one stream (``route.*``); ``table`` is then optional.
    """

    table: str = ""  # required unless route.by is set (checked with the other options)
    catalog: CatalogConfig = Field(default_factory=CatalogConfig)
    partition_by: str | None = None
    sink_id: str | None = None
    table_properties: dict[str, str] = Field(default_factory=dict)
    write: WriteConfig = Field(default_factory=WriteConfig)
    commit: CommitConfig = Field(default_factory=CommitConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    table_schema: SchemaConfig = Field(default_factory=SchemaConfig)
    dead_letter: DeadLetterConfig = Field(default_factory=DeadLetterConfig)
    state_location: str | None = Field(default=None, min_length=1)
    upsert: UpsertConfig = Field(default_factory=UpsertConfig)
    route: RouteConfig = Field(default_factory=RouteConfig)

    @field_validator("table")
    @classmethod
    def _qualified(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) < 2 or any(not p.strip() for p in parts):
            raise ValueError("must be a qualified identifier 'namespace.table', e.g. 'analytics.trips'")
        return value

    @field_validator("sink_id")
    @classmethod
    def _safe_sink_id(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", value):
            raise ValueError("must be 1-128 characters of letters, digits, '_', '.', '-'")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> SinkConfig:
        _check_partitioning(self)
        _check_write_and_commit(self.write, self.commit)
        staged = {"target_bytes", "interval_s", "max_batches"} & self.commit.model_fields_set
        check_upsert(self.upsert, bool(staged))
        check_route(self.route, self.table, staged, self.write.distribution_mode, self.upsert)
        return self

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """Build a config from Spark-style string options (keys are case-insensitive).

        Raises:
            ConfigError: An option is unknown or its value is not accepted; the message
                names the option, the value and what is accepted.
        """
        return _from_options(cls, options)


def _check_partitioning(config: SinkConfig) -> None:
    """``partition-by`` parses, names each field once, and has a bucket for ``distribution-mode=bucket``.

    Whether its columns exist and take their transforms needs the stream's schema: that
    is checked before the table is created (:func:`sink.partitioning.build_partition_spec`).
    """
    text = config.partition_by
    try:
        terms = parse_partition_by(text)
        check_terms(terms, config.table_schema.case_sensitive)
    except PartitionSpecError as e:
        raise PartitionSpecError(
            f"invalid value {text!r} for option 'partition-by': {e.message}", hint=e.hint
        ) from e
    mode = config.write.distribution_mode
    if (
        terms
        and mode is DistributionMode.BUCKET
        and not any(isinstance(t.transform, BucketTransform) for t in terms)
    ):
        raise ConfigError(
            f"invalid value {mode.value!r} for option 'distribution-mode': partition-by {text!r} "
            "has no bucket(N, col) term to shuffle by",
            hint="use distribution-mode=hash (or none), or add a bucket(N, col) term to partition-by",
        )


def _check_write_and_commit(write: WriteConfig, commit: CommitConfig) -> None:
    if commit.min_wait_ms > commit.max_wait_ms:
        raise ConfigError(
            f"option 'commit.retry.min-wait-ms' is {commit.min_wait_ms}, above "
            f"'commit.retry.max-wait-ms' {commit.max_wait_ms}",
            hint="set commit.retry.min-wait-ms <= commit.retry.max-wait-ms",
        )
    if "row_group_size_bytes" not in write.model_fields_set:
        return  # the default is capped by small targets where files are written
    if write.row_group_size_bytes > write.target_file_size_bytes:
        raise ConfigError(
            f"option 'write.parquet.row-group-size-bytes' is {write.row_group_size_bytes}, above "
            f"'write.target-file-size-bytes' {write.target_file_size_bytes}",
            hint="a row group must fit in a data file: set write.parquet.row-group-size-bytes "
            "<= write.target-file-size-bytes",
        )


def _from_options(cls: type[SinkConfig], options: Mapping[str, Any]) -> SinkConfig:
    data, origin = option_tree(options)
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        loc = tuple(str(p) for p in first["loc"])
        key = origin.get(loc, ".".join(loc))
        value = first.get("input")
        raise ConfigError(
            f"invalid value {value!r} for option {key!r}: {first['msg']}",
            hint=_accepted_hint(loc),
        ) from e


def _accepted_hint(loc: tuple[str, ...]) -> str:
    if loc and loc[-1] == "distribution_mode":
        return f"use one of {[m.value for m in DistributionMode]}"
    if loc == ("upsert", "mode"):
        return "use one of ['append', 'upsert']"
    if loc and loc[-1] == "evolution":
        return f"use one of {[m.value for m in SchemaEvolution]}"
    if loc and loc[-1] == "on_bad_record":
        return f"use one of {[m.value for m in BadRecordPolicy]}"
    if loc and loc[-1] in ("case_sensitive", "allow_append_to_keyed_table"):
        return "use true or false"
    if loc == ("dead_letter", "table"):
        return "set 'dead-letter.table' to 'namespace.table'"
    if loc == ("table",):
        return "set 'table' to 'namespace.table'"
    if loc == ("commit", "interval_s"):
        return "use a finite number of seconds above 0, e.g. 60"
    if loc[:1] == ("metrics",):
        return {
            "port": "use a port number 0-65535 (0: any free port)",
            "host": "use an address to bind, e.g. 127.0.0.1 or 0.0.0.0",
            "pushgateway_url": "use the Pushgateway's address, e.g. http://pushgateway:9091",
            "pushgateway_job": "use 1-128 letters, digits, '_', '.', '-'",
        }.get(loc[-1], "see the option's description in README.md")
    return "see the option's description in README.md"
