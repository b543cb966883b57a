"""Options of the Kafka source: Spark's Kafka source option names, validated once.

Accepted options (case-insensitive, like Spark's):

- ``kafka.bootstrap.servers`` (required) and any other ``kafka.*`` option, passed without
  the prefix to confluent-kafka (librdkafka names: ``kafka.security.protocol``,
  ``kafka.sasl.mechanism``, ...).
- Exactly one of ``subscribe`` (comma-separated topics), ``subscribePattern`` (a regular
  expression matched against whole topic names) or ``assign`` (``{"topic": [0, 1]}``).
- ``startingOffsets``: ``earliest``, ``latest`` or ``{"topic": {"0": 23, "1": -2}}``
  (-2 earliest, -1 latest). Streaming default ``latest``, batch default ``earliest``.
- ``endingOffsets`` (batch queries only): ``latest`` (default) or a JSON as above.
- ``maxOffsetsPerTrigger``, ``minPartitions``, ``failOnDataLoss`` (default true),
  ``maxPartitions`` (this source's own: at most this many Spark partitions per
  micro-batch, small offset ranges packed together; default one per topic-partition),
  ``kafkaConsumer.pollTimeoutMs``, ``fetchOffset.numRetries``,
  ``fetchOffset.retryIntervalMs``, ``groupIdPrefix``, ``includeHeaders`` (only false).
- ``brokerTimeoutMs`` (this source's own, default 30,000): how long the driver's offset
  queries try, ``fetchOffset.numRetries`` attempts included, before the query fails with
  ``ICESINK-KAFKA-SOURCE`` naming the brokers; so a missing broker ends the query in
  seconds, at start-up or mid-run, instead of after minutes of retries.

The clients log through :class:`~streaming_jobs.kafka.source.kafka_client_log.ClientLog`:
librdkafka's repeated lines (a failed connection every 50 ms) at most once per 30 s.

Anything else fails with :class:`~sink.errors.ConfigError` naming the option, the value
and what is accepted.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from icesink import ConfigError
from streaming_jobs.kafka.source.kafka_client_log import ClientLog
from streaming_jobs.kafka.source.kafka_errors import require_client
from streaming_jobs.kafka.source.kafka_offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartitionId,
    offsets_from_json,
)
from streaming_jobs.kafka.source.kafka_subscription import Subscription, parse_subscription

Mode = Literal["stream", "batch"]

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default: spark.network.timeout
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1_000
DEFAULT_BROKER_TIMEOUT_MS = 30_000  # with Spark's start, a missing broker is reported within a minute
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"
FETCH_WAIT_MAX_MS = 100  # short broker-side waits keep the end-of-range checks quick
QUEUED_MIN_MESSAGES = 1_000_000  # prefetch bound; queued.max.messages.kbytes (64 MiB) still applies

# Lower-case option name -> the spelling used in messages.
_OPTIONS = {
    name.lower(): name
    for name in (
        "kafka.bootstrap.servers",
        "subscribe",
        "subscribePattern",
        "assign",
        "startingOffsets",
        "endingOffsets",
        "maxOffsetsPerTrigger",
        "minPartitions",
        "maxPartitions",
        "failOnDataLoss",
        "includeHeaders",
        "kafkaConsumer.pollTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "groupIdPrefix",
        "brokerTimeoutMs",
    )
}
# Options of Spark's Kafka source that this source does not implement.
_UNSUPPORTED = {
    name.lower(): name
    for name in (
        "startingTimestamp",
        "startingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "endingTimestamp",
        "endingOffsetsByTimestamp",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "maxRecordsPerPartition",
    )
}
# kafka.* options the source sets itself (as Spark's Kafka source forbids them).
_RESERVED_KAFKA = {
    "auto.offset.reset": "use the startingOffsets option",
    "enable.auto.commit": "the source never commits offsets to Kafka; Spark's checkpoint holds them",
    "enable.partition.eof": "the source needs end-of-partition events to stop reading",
    "key.deserializer": "keys are always returned as binary; cast them in the query",
    "value.deserializer": "values are always returned as binary; cast them in the query",
}


@dataclass(frozen=True)
class OffsetSpec:
    """A ``startingOffsets``/``endingOffsets`` value.

    Attributes:
        kind: ``earliest``, ``latest`` or ``specific``.
        specific: For ``specific``: (topic-partition, offset) pairs, offset -2 meaning
            earliest and -1 latest.
    """

    kind: Literal["earliest", "latest", "specific"]
    specific: tuple[tuple[TopicPartitionId, int], ...] = ()

    def offsets(self) -> PartitionOffsets:
        """The specific offsets as a dict."""
        return dict(self.specific)


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The validated options of one Kafka source (picklable, shipped to executors).

    Attributes:
        bootstrap_servers: ``kafka.bootstrap.servers``.
        subscription: What to read.
        starting_offsets: Where a new query starts.
        ending_offsets: Where a batch query ends.
        max_offsets_per_trigger: Rate limit per micro-batch, or None.
        min_partitions: Minimum number of Spark partitions per micro-batch, or None.
        max_partitions: Maximum number of Spark partitions per micro-batch, or None.
        fail_on_data_loss: Whether lost data fails the query.
        poll_timeout_ms: How long a task waits for records before failing.
        fetch_offset_num_retries: Attempts of a driver offset query.
        fetch_offset_retry_interval_ms: Pause between those attempts.
        group_id: The consumer group id given to clients (never joined or committed).
        kafka_params: The other ``kafka.*`` options, without the prefix.
        broker_timeout_ms: How long a driver offset query tries, its retries included.
    """

    bootstrap_servers: str
    subscription: Subscription
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_partitions: int | None
    fail_on_data_loss: bool
    poll_timeout_ms: int
    fetch_offset_num_retries: int
    fetch_offset_retry_interval_ms: int
    group_id: str
    kafka_params: tuple[tuple[str, str], ...]
    broker_timeout_ms: int = DEFAULT_BROKER_TIMEOUT_MS

    @classmethod
    def from_options(cls, options: Mapping[str, str], mode: Mode | None = None) -> KafkaSourceOptions:
        """Validate Spark-style string options.

        Args:
            options: The data source options (keys in any case).
            mode: ``stream`` or ``batch`` to apply that query type's rules and defaults;
                None checks only the rules common to both.

        Returns:
            The validated options.

        Raises:
            ConfigError: Naming the option, its value and what is accepted.
        """
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        kafka_params: dict[str, str] = {}
        for key, value in opts.items():
            if key.startswith("kafka."):
                name = key[len("kafka.") :]
                if name in _RESERVED_KAFKA:
                    raise ConfigError(
                        f"option {key!r} (value {value!r}) is not supported",
                        hint=_RESERVED_KAFKA[name],
                        option=key,
                    )
                if name != "bootstrap.servers":
                    kafka_params[name] = value
            elif key in _UNSUPPORTED:
                raise ConfigError(
                    f"option {_UNSUPPORTED[key]!r} (value {value!r}) of Spark's Kafka source is not "
                    "supported by icesink's Python Kafka source",
                    hint="use startingOffsets/maxOffsetsPerTrigger, or Spark's JVM Kafka connector",
                    option=_UNSUPPORTED[key],
                )
            elif key not in _OPTIONS:
                raise ConfigError(
                    f"unknown option {key!r} (value {value!r})",
                    hint="accepted options are kafka.* and "
                    + ", ".join(sorted(v for v in _OPTIONS.values() if not v.startswith("kafka."))),
                    option=key,
                )
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise ConfigError(
                "option 'kafka.bootstrap.servers' is required",
                hint="set it to the brokers' host:port list, e.g. 'broker1:9092,broker2:9092'",
                option="kafka.bootstrap.servers",
            )
        starting = _offset_spec(opts, "startingOffsets")
        ending = _offset_spec(opts, "endingOffsets")
        if opts.get("includeheaders", "false").strip().lower() != "false":
            raise ConfigError(
                f"option 'includeHeaders' has value {opts['includeheaders']!r}; only 'false' is supported",
                hint="remove the option: this source returns key, value, topic, partition, offset, "
                "timestamp and timestampType",
                option="includeHeaders",
            )
        if mode == "stream":
            if "endingoffsets" in opts:
                raise ConfigError(
                    f"option 'endingOffsets' (value {opts['endingoffsets']!r}) is not valid in a "
                    "streaming query",
                    hint="remove it, or read with spark.read (a batch query)",
                    option="endingOffsets",
                )
            starting = starting or OffsetSpec("latest")
        elif mode == "batch":
            starting = starting or OffsetSpec("earliest")
            _check_batch_bound(starting, "startingOffsets", forbidden=LATEST, opts=opts)
            _check_batch_bound(ending or OffsetSpec("latest"), "endingOffsets", forbidden=EARLIEST, opts=opts)
        prefix = opts.get("groupidprefix", DEFAULT_GROUP_ID_PREFIX)
        min_partitions = _positive_int(opts, "minPartitions")
        max_partitions = _positive_int(opts, "maxPartitions")
        if min_partitions is not None and max_partitions is not None and min_partitions > max_partitions:
            raise ConfigError(
                f"option 'minPartitions' ({min_partitions}) is greater than "
                f"'maxPartitions' ({max_partitions})",
                hint="set minPartitions <= maxPartitions, or drop one of them",
                option="maxPartitions",
            )
        return cls(
            bootstrap_servers=bootstrap,
            subscription=parse_subscription(opts),
            starting_offsets=starting or OffsetSpec("latest"),
            ending_offsets=ending or OffsetSpec("latest"),
            max_offsets_per_trigger=_positive_int(opts, "maxOffsetsPerTrigger"),
            min_partitions=min_partitions,
            max_partitions=max_partitions,
            fail_on_data_loss=_boolean(opts, "failOnDataLoss", default=True),
            poll_timeout_ms=_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
            fetch_offset_num_retries=_positive_int(opts, "fetchOffset.numRetries")
            or DEFAULT_FETCH_OFFSET_NUM_RETRIES,
            fetch_offset_retry_interval_ms=_positive_int(opts, "fetchOffset.retryIntervalMs")
            or DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS,
            group_id=kafka_params.pop("group.id", f"{prefix}-{uuid.uuid4()}"),
            kafka_params=tuple(sorted(kafka_params.items())),
            broker_timeout_ms=_positive_int(opts, "brokerTimeoutMs") or DEFAULT_BROKER_TIMEOUT_MS,
        )

    def consumer_config(self, role: str) -> dict[str, Any]:
        """A confluent-kafka consumer configuration; the user's ``kafka.*`` options win.

        The consumer never joins its group (partitions are assigned) and never commits.

        Args:
            role: ``driver`` or ``executor``, appended to the client id.
        """
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.group_id,
            "client.id": f"icesink-kafka-source-{role}",
            "isolation.level": "read_uncommitted",  # Spark's (the Java client's) default
            "fetch.wait.max.ms": FETCH_WAIT_MAX_MS,
            # Prefetch deeper than librdkafka's default: fewer fetch round trips (benchmarks/README.md).
            "queued.min.messages": QUEUED_MIN_MESSAGES,
            "logger": ClientLog(),
        }
        config.update(self.kafka_params)
        config.update(
            {"enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "error"}
        )
        return config

    def admin_config(self) -> dict[str, Any]:
        """A confluent-kafka admin client configuration (metadata and offset queries)."""
        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        config.update(self.kafka_params)
        for consumer_only in ("isolation.level", "fetch.wait.max.ms", "group.id"):
            config.pop(consumer_only, None)
        config["client.id"] = "icesink-kafka-source-admin"
        config.setdefault("logger", ClientLog())
        return config


def check_client_config(options: KafkaSourceOptions) -> None:
    """Fail now if confluent-kafka rejects the ``kafka.*`` options (unknown name, bad value).

    Creates and closes a consumer, which checks the configuration without waiting for
    the brokers.

    Raises:
        ConfigError: With librdkafka's message, which names the property.
    """
    require_client()  # a ConfigError naming the kafka extra when confluent-kafka is missing
    from confluent_kafka import Consumer, KafkaException

    try:
        Consumer(options.consumer_config("check")).close()
    except (KafkaException, ValueError, TypeError) as e:
        raise ConfigError(
            f"confluent-kafka rejects the kafka.* options: {e}",
            hint="use librdkafka property names and values (see librdkafka's CONFIGURATION.md), "
            "e.g. kafka.security.protocol, kafka.sasl.mechanism, kafka.ssl.ca.location",
        ) from e


def _offset_spec(opts: Mapping[str, str], name: str) -> OffsetSpec | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec("earliest" if text.lower() == "earliest" else "latest")
    try:
        offsets = offsets_from_json(json.loads(text))
        bad = {tp: o for tp, o in offsets.items() if o < EARLIEST}
        if bad:
            raise ValueError(f"offsets must be >= 0, or -2 (earliest) or -1 (latest); got {bad}")
        if not offsets:
            raise ValueError("no partitions given")
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise ConfigError(
            f"option {name!r} has value {value!r}, which is not valid: {e}",
            hint=f"accepted: 'earliest', 'latest' or a JSON such as "
            f'{{"topicA": {{"0": 23, "1": -2}}}} (-2 earliest, -1 latest); {name} must list every '
            "partition of the subscribed topics",
            option=name,
        ) from e
    return OffsetSpec("specific", tuple(sorted(offsets.items())))


def _check_batch_bound(spec: OffsetSpec, name: str, *, forbidden: int, opts: Mapping[str, str]) -> None:
    word = "latest" if forbidden == LATEST else "earliest"
    if spec.kind == word or any(o == forbidden for _, o in spec.specific):
        raise ConfigError(
            f"option {name!r} has value {opts.get(name.lower(), word)!r}; {word} ({forbidden}) is not "
            f"valid for {name} in a batch query",
            hint="batch queries read from startingOffsets (default earliest) to endingOffsets "
            "(default latest)",
            option=name,
        )


def _positive_int(opts: Mapping[str, str], name: str) -> int | None:
    value = opts.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"option {name!r} has value {value!r}; accepted: a positive integer", option=name)
    return number


def _boolean(opts: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {name!r} has value {value!r}; accepted: 'true' or 'false'", option=name)
    return value.strip().lower() == "true"
