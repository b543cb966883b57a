"""The Kafka source's options one by one, read from Spark-style strings: names, offsets, numbers.

:class:`~icesink.jobs.kafka.source.kafka_options.KafkaSourceOptions` puts them together;
each function here reads one option or one rule between two, and fails with
:class:`~icesink.ConfigError` naming the option, its value and what is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka_offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartitionId,
    offsets_from_json,
)

Mode = Literal["stream", "batch"]

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


def kafka_params(opts: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options but the brokers, without the prefix; any other name must be known.

    Args:
        opts: The options, keys in lower case.
    """
    params: dict[str, str] = {}
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
                params[name] = value
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
    return params


def bootstrap_servers(opts: Mapping[str, str]) -> str:
    """``kafka.bootstrap.servers``, required."""
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise ConfigError(
            "option 'kafka.bootstrap.servers' is required",
            hint="set it to the brokers' host:port list, e.g. 'broker1:9092,broker2:9092'",
            option="kafka.bootstrap.servers",
        )
    return bootstrap


def offset_bounds(opts: Mapping[str, str], mode: Mode | None) -> tuple[OffsetSpec, OffsetSpec]:
    """``startingOffsets`` and ``endingOffsets``, with the defaults and rules of ``mode``'s queries."""
    starting = _offset_spec(opts, "startingOffsets")
    ending = _offset_spec(opts, "endingOffsets")
    if mode == "stream":
        if "endingoffsets" in opts:
            raise ConfigError(
                f"option 'endingOffsets' (value {opts['endingoffsets']!r}) is not valid in a streaming query",
                hint="remove it, or read with spark.read (a batch query)",
                option="endingOffsets",
            )
        starting = starting or OffsetSpec("latest")
    elif mode == "batch":
        starting = starting or OffsetSpec("earliest")
        _check_batch_bound(starting, "startingOffsets", forbidden=LATEST, opts=opts)
        _check_batch_bound(ending or OffsetSpec("latest"), "endingOffsets", forbidden=EARLIEST, opts=opts)
    return starting or OffsetSpec("latest"), ending or OffsetSpec("latest")


def check_no_headers(opts: Mapping[str, str]) -> None:
    """``includeHeaders`` may only be false."""
    if opts.get("includeheaders", "false").strip().lower() != "false":
        raise ConfigError(
            f"option 'includeHeaders' has value {opts['includeheaders']!r}; only 'false' is supported",
            hint="remove the option: this source returns key, value, topic, partition, offset, "
            "timestamp and timestampType",
            option="includeHeaders",
        )


def partition_bounds(opts: Mapping[str, str]) -> tuple[int | None, int | None]:
    """``minPartitions`` and ``maxPartitions``, the first not above the second."""
    min_partitions = positive_int(opts, "minPartitions")
    max_partitions = positive_int(opts, "maxPartitions")
    if min_partitions is not None and max_partitions is not None and min_partitions > max_partitions:
        raise ConfigError(
            f"option 'minPartitions' ({min_partitions}) is greater than 'maxPartitions' ({max_partitions})",
            hint="set minPartitions <= maxPartitions, or drop one of them",
            option="maxPartitions",
        )
    return min_partitions, max_partitions


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


def positive_int(opts: Mapping[str, str], name: str) -> int | None:
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


def boolean(opts: Mapping[str, str], name: str, *, default: bool) -> bool:
    value = opts.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise ConfigError(f"option {name!r} has value {value!r}; accepted: 'true' or 'false'", option=name)
    return value.strip().lower() == "true"
