"""Which topic-partitions a Kafka source reads: ``subscribe``, ``subscribePattern`` or ``assign``."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka_offsets import TopicPartitionId

_OPTION_NAMES = {"subscribe": "subscribe", "subscribepattern": "subscribePattern", "assign": "assign"}


@dataclass(frozen=True)
class Subscription:
    """Which topic-partitions the source reads.

    Attributes:
        mode: ``subscribe``, ``subscribePattern`` or ``assign``.
        topics: The topics of ``subscribe``.
        pattern: The regular expression of ``subscribePattern``.
        partitions: The topic-partitions of ``assign``.
    """

    mode: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartitionId, ...] = ()

    def select(self, partition_counts: Mapping[str, int]) -> list[TopicPartitionId]:
        """The subscribed topic-partitions that exist.

        Args:
            partition_counts: The number of partitions of every topic of the cluster.

        Returns:
            The topic-partitions to read, sorted.
        """
        if self.mode == "assign":
            return sorted(tp for tp in self.partitions if tp[1] < partition_counts.get(tp[0], 0))
        if self.mode == "subscribe":
            topics = [t for t in self.topics if t in partition_counts]
        else:
            regex = re.compile(self.pattern or "")
            # Like Kafka's pattern subscription: whole names, internal topics excluded.
            topics = [t for t in partition_counts if not t.startswith("__") and regex.fullmatch(t)]
        return sorted((t, p) for t in topics for p in range(partition_counts[t]))


def parse_subscription(opts: Mapping[str, str]) -> Subscription:
    """Read the one of ``subscribe``, ``subscribePattern`` and ``assign`` that is set.

    Args:
        opts: The options, keys in lower case.

    Raises:
        ConfigError: If none or several are set, or the value is not valid.
    """
    given = [key for key in _OPTION_NAMES if key in opts]
    if len(given) != 1:
        raise ConfigError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be set, "
            f"got {[_OPTION_NAMES[k] for k in given] or 'none'}",
            hint="e.g. subscribe='topic1,topic2' or subscribePattern='events-.*'",
        )
    key = given[0]
    value = opts[key]
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(","))
        if not all(topics):
            raise ConfigError(
                f"option 'subscribe' has value {value!r}; accepted: a comma-separated list of topic names",
                option="subscribe",
            )
        return Subscription("subscribe", topics=topics)
    if key == "subscribepattern":
        try:
            re.compile(value)
        except re.error as e:
            raise ConfigError(
                f"option 'subscribePattern' has value {value!r}, which is not a regular expression ({e})",
                hint="e.g. 'events-.*' (matched against whole topic names)",
                option="subscribePattern",
            ) from e
        if not value:
            raise ConfigError("option 'subscribePattern' is empty", option="subscribePattern")
        return Subscription("subscribePattern", pattern=value)
    try:
        parsed = json.loads(value)
        if not isinstance(parsed, dict) or not parsed:
            raise ValueError("expected a non-empty JSON object")
        partitions: list[TopicPartitionId] = []
        for topic, numbers in parsed.items():
            if not isinstance(numbers, list) or not all(
                isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers
            ):
                raise ValueError(f"topic {topic!r} must map to a list of partition numbers")
            partitions.extend((str(topic), n) for n in numbers)
    except ValueError as e:
        raise ConfigError(
            f"option 'assign' has value {value!r}: {e}",
            hint='accepted: a JSON object of topics to partition lists, e.g. {"topicA": [0, 1]}',
            option="assign",
        ) from e
    return Subscription("assign", partitions=tuple(sorted(set(partitions))))
