"""Sink configuration: a frozen, validated pydantic model tree.

Two ways in: ``SinkConfig(...)`` with typed values, or :meth:`SinkConfig.from_options`
with Spark-style string options (case-insensitive keys). Every bad value fails here, at
construction, with the key, the value and what would be accepted, never in the middle of
a stream. Each option's description below is the text of ``docs/options.md`` (``make docs``).
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
    ValidationError,
    field_validator,
    model_validator,
)

from icesink.config_catalog import CatalogConfig
from icesink.config_maintenance import MaintenanceConfig
from icesink.config_options import option_tree
from icesink.config_route import RouteConfig, check_route
from icesink.config_timeouts import TimeoutConfig
from icesink.config_upsert import UpsertConfig, check_upsert
from icesink.errors import ConfigError
from icesink.partitioning import check_partition_by

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

    ADD_COLUMNS_AND_WIDEN = "add-columns-and-widen"  # new optional columns, type promotions, renames
    OFF = "off"  # never: values are converted to the table's types or dead-lettered


class BadRecordPolicy(StrEnum):
    """What happens to a row whose values cannot be converted (``on-bad-record``)."""

    DLQ = "dlq"  # to the dead-letter table; the stream goes on
    FAIL = "fail"  # the batch fails, naming the column, the value and this option


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WriteConfig(_Frozen):
    """How data files are written (executor side).

    Attributes:
        target_file_size_bytes: On-disk size at which a data file rolls to the next; default
            the table's property, else 512 MiB.
        row_group_size_bytes: Estimated on-disk size of a Parquet row group.
        memory_budget_bytes: Most Arrow memory one write task holds: its open writers' rows and
            its input in flight; above it the largest open file is closed (never dropped).
        compression_codec: Parquet codec, the table's property by default: ``zstd``, ``snappy``,
            ``gzip``, ``lz4``, ``brotli``, ``none`` or ``uncompressed``.
        distribution_mode: The shuffle before the write tasks: ``bucket`` (shuffle partition ==
            bucket id), ``hash`` (by the partition tuple) or ``none`` (no shuffle). Default:
            ``bucket`` when the spec has a bucket, ``hash`` when it has other fields, else ``none``.
            A routed sink (``route.by``) shuffles all its tables in its one write job: ``bucket``
            gives every (table, bucket) one shuffle partition (a table without a bucket field a
            few, by its partition tuple; an unpartitioned one a single one), ``hash`` shuffles by
            (table, partition tuple); unset it stays ``none``, as routed writes always were.
    """

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

    def setting(self, properties: Mapping[str, str], table_property: str, option: str) -> Any:
        """A write setting of a table: the option when given, else the table property, else the default."""
        if option in self.model_fields_set:
            return getattr(self, option)
        return properties.get(table_property, getattr(self, option))

    def target_file_size(self, properties: Mapping[str, str]) -> int:
        """The target data file size of a table with these ``properties`` (see :meth:`setting`)."""
        return int(self.setting(properties, "write.target-file-size-bytes", "target_file_size_bytes"))


class CommitConfig(_Frozen):
    """How and when the driver commits; unset cadence: one commit per batch (:mod:`icesink.commit.policy`).

    Attributes:
        retries: Tries after a commit lost a race with another writer.
        min_wait_ms: First wait before a retry; the waits double up to ``max_wait_ms``.
        max_wait_ms: Longest wait between two tries.
        target_bytes: Stage batches and commit once their files hold this many bytes.
        interval_s: Stage batches and commit once the oldest staged one is this many seconds old.
        max_batches: Stage batches and commit every this many batches. Any of the three also
            holds for write.mode=upsert: each batch's keys are looked up in the table and in
            the batches staged before it, its position deletes staged with its data files, and
            the staged batches committed as one row delta (one snapshot); a conflicting
            concurrent commit redoes their lookups.
    """

    retries: int = Field(default=DEFAULT_COMMIT_RETRIES, ge=0, le=100)
    min_wait_ms: int = Field(default=DEFAULT_COMMIT_MIN_WAIT_MS, ge=0)
    max_wait_ms: int = Field(default=DEFAULT_COMMIT_MAX_WAIT_MS, ge=0)
    target_bytes: int | None = Field(default=None, ge=1)
    interval_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_batches: int | None = Field(default=None, ge=1)


class SchemaConfig(_Frozen):
    """How a batch's columns meet the table's schema.

    Attributes:
        evolution: Whether new columns are added, types widened and columns renamed
            (``schema.evolution``); a batch field whose Spark metadata ``icesink.renamed-from``
            names a column, or whose ``icesink.source-id`` a column of another name keeps (in
            its doc), renames that column, keeping its field id and data;
            ``off``: values are converted or dead-lettered, a column the table lacks fails the batch.
        case_sensitive: Whether column names must match in case (``schema.case-sensitive``).
    """

    evolution: SchemaEvolution = SchemaEvolution.ADD_COLUMNS_AND_WIDEN
    case_sensitive: bool = False


class DeadLetterConfig(_Frozen):
    """Rows that cannot be converted to the table's types.

    Attributes:
        on_bad_record: ``dlq``: such rows go to the dead-letter table; ``fail``: the batch fails,
            naming the column, the value and this option (``on-bad-record``).
        table: The dead-letter table (``dead-letter.table``), created on first use; default
            ``<table>__dlq`` (a routed sink's: ``<namespace>.routed__dlq``).
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
    """Where the sink's Prometheus metrics go (see :mod:`icesink.metrics_server`).

    Attributes:
        port: Port of the HTTP endpoint on the driver (``metrics.port``); unset (the
            default, for library use) serves nothing, 0 any free port.
        host: Address the endpoint binds (``metrics.host``).
        pushgateway_url: Pushgateway to push to, for short jobs (``metrics.pushgateway-url``).
        pushgateway_job: ``job`` of the pushed group (``metrics.pushgateway-job``).
        max_tables: Most tables with series of their own; the others share the ``table``
            label ``_other``.
    """

    port: int | None = Field(default=None, ge=0, le=65535)
    host: str = Field(default=DEFAULT_METRICS_HOST, min_length=1)
    pushgateway_url: str | None = Field(default=None, pattern=r"^(https?://)?[^\s/:]+(:\d+)?(/\S*)?$")
    pushgateway_job: str = Field(default=DEFAULT_PUSHGATEWAY_JOB, pattern=r"^[A-Za-z0-9_.-]{1,128}$")
    max_tables: int = Field(default=1000, ge=1)


class SinkConfig(_Frozen):
    """Everything an :class:`~icesink.sink.IcebergSink` needs.

    Attributes:
        table: Table identifier, ``namespace.name``; created when missing. Required unless
            ``route.by`` is set.
        catalog: The catalog to load.
        partition_by: Partition spec for a table the sink creates, comma separated: ``col``,
            ``identity(col)``, ``bucket(N, col)``, ``truncate(W, col)``, ``year``/``month``/
            ``day``/``hour(col)``, e.g. ``"day(ts), bucket(16, id)"``. An existing table keeps its own.
        sink_id: Identity recorded with every commit for the replay check. Default:
            the streaming query's id, which is stable across restarts from one checkpoint.
        table_properties: Properties for a table the sink creates (``table-property.<key>``),
            beside the sink's own (manifest merging, old metadata files deleted).
        write: Data file writing.
        commit: Commit retries.
        metrics: Prometheus endpoint and Pushgateway.
        table_schema: Column matching and schema evolution.
        dead_letter: Rows that cannot be converted.
        state_location: Where the sink keeps its attempt records and staged batches
            (:mod:`icesink.commit.state`), outside every table's location, e.g.
            ``s3://bucket/icesink-state``. Default ``<warehouse>/_icesink_state`` when the
            warehouse is a local folder; required otherwise.
        upsert: Append or upsert (``write.mode``, ``upsert.*``).
        route: Many tables from one stream (``route.*``); ``table`` is then optional.
        timeouts: The longest waits for a silent catalog or object store (``timeout.*``).
        maintenance: Compaction, snapshot expiry and orphan removal after commits (``maintenance.*``).
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
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)

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
        check_partition_by(self.partition_by, self.table_schema.case_sensitive, self.write.distribution_mode)
        _check_write_and_commit(self.write, self.commit)
        check_upsert(self.upsert)
        check_route(self.route, self.table, self.upsert)
        return self

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SinkConfig:
        """Build a config from Spark-style string options (keys are case-insensitive).

        Raises:
            ConfigError: An option is unknown or its value is not accepted; the message
                names the option, the value and what is accepted.
        """
        return _from_options(cls, options)


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
    if loc[:1] == ("timeouts",):
        return "use a finite number of seconds above 0, e.g. 10"
    if loc[:1] == ("metrics",):
        return {
            "port": "use a port number 0-65535 (0: any free port)",
            "host": "use an address to bind, e.g. 127.0.0.1 or 0.0.0.0",
            "pushgateway_url": "use the Pushgateway's address, e.g. http://pushgateway:9091",
            "pushgateway_job": "use 1-128 letters, digits, '_', '.', '-'",
        }.get(loc[-1], "see the option's description in docs/options.md")
    return "see the option's description in docs/options.md"
