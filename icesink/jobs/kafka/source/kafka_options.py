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

The clients log through :class:`~icesink.jobs.kafka.source.kafka_client_log.ClientLog`:
librdkafka's repeated lines (a failed connection every 50 ms) at most once per 30 s.

Anything else fails with :class:`~icesink.ConfigError` naming the option, the value
and what is accepted (each option is read in
:mod:`icesink.jobs.kafka.source.kafka_option_values`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka_client_log import ClientLog
from icesink.jobs.kafka.source.kafka_errors import require_client
from icesink.jobs.kafka.source.kafka_option_values import (
    Mode,
    OffsetSpec,
    boolean,
    bootstrap_servers,
    check_no_headers,
    kafka_params,
    offset_bounds,
    partition_bounds,
    positive_int,
)
from icesink.jobs.kafka.source.kafka_subscription import Subscription, parse_subscription

DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's default: spark.network.timeout
DEFAULT_FETCH_OFFSET_NUM_RETRIES = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1_000
DEFAULT_BROKER_TIMEOUT_MS = 30_000  # with Spark's start, a missing broker is reported within a minute
DEFAULT_GROUP_ID_PREFIX = "spark-kafka-source"
FETCH_WAIT_MAX_MS = 100  # short broker-side waits keep the end-of-range checks quick
QUEUED_MIN_MESSAGES = 1_000_000  # prefetch bound; queued.max.messages.kbytes (64 MiB) still applies


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
        params = kafka_params(opts)
        bootstrap = bootstrap_servers(opts)
        starting, ending = offset_bounds(opts, mode)
        check_no_headers(opts)
        prefix = opts.get("groupidprefix", DEFAULT_GROUP_ID_PREFIX)
        min_partitions, max_partitions = partition_bounds(opts)
        return cls(
            bootstrap_servers=bootstrap,
            subscription=parse_subscription(opts),
            starting_offsets=starting,
            ending_offsets=ending,
            max_offsets_per_trigger=positive_int(opts, "maxOffsetsPerTrigger"),
            min_partitions=min_partitions,
            max_partitions=max_partitions,
            fail_on_data_loss=boolean(opts, "failOnDataLoss", default=True),
            poll_timeout_ms=positive_int(opts, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS,
            fetch_offset_num_retries=positive_int(opts, "fetchOffset.numRetries")
            or DEFAULT_FETCH_OFFSET_NUM_RETRIES,
            fetch_offset_retry_interval_ms=positive_int(opts, "fetchOffset.retryIntervalMs")
            or DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS,
            group_id=params.pop("group.id", f"{prefix}-{uuid.uuid4()}"),
            kafka_params=tuple(sorted(params.items())),
            broker_timeout_ms=positive_int(opts, "brokerTimeoutMs") or DEFAULT_BROKER_TIMEOUT_MS,
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
