"""Driver-side Kafka queries: which partitions exist, and their earliest and latest offsets.

The latest offset is not taken on trust from the broker. Tansu (a Kafka-protocol broker
some of the benchmarks run on) reports the high watermark as the *base offset of the last
record batch + 1*, so when a producer packed several records into that batch, the
watermark is short of the real end. :meth:`KafkaOffsetReader.latest_offsets` therefore
reads the tail: it fetches from ``watermark - 1`` (the start of the last batch on Tansu,
the last record on Kafka) until the consumer reports the end of the partition, and takes
the fetch position there as the end. A partition whose watermark has not moved since its last probe keeps
its probed end for up to ``PROBED_END_TTL_S``, so an idle stream costs one small read
per partition every few seconds; the expiry catches a topic deleted and recreated with
the same watermark. On a broker with exact watermarks the probe reads one record.

Clients are created lazily on first use and are never pickled.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka_errors import KafkaSourceError
from icesink.jobs.kafka.source.kafka_offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartitionId
from icesink.jobs.kafka.source.kafka_option_values import OffsetSpec
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
TAIL_PROBE_TIMEOUT_S = 10.0
PROBED_END_TTL_S = 10.0
_TAIL_PROBE_POLL_S = 0.05
_TAIL_PROBE_BATCH = 10_000

T = TypeVar("T")


class KafkaOffsetReader:
    """Offset queries of one source on the driver.

    Args:
        options: The source's options.
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._admin: Any = None
        self._consumer: Any = None
        # Per partition: (reported high watermark, probed end offset, monotonic probe time).
        self._probed_ends: dict[TopicPartitionId, tuple[int, int, float]] = {}

    def topic_partitions(self) -> list[TopicPartitionId]:
        """The subscribed topic-partitions that exist now, sorted."""
        metadata = self._retry(
            "list topics", lambda timeout_s: self._admin_client().list_topics(timeout=timeout_s)
        )
        counts = {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        return self._options.subscription.select(counts)

    def earliest_offsets(self, tps: Iterable[TopicPartitionId]) -> PartitionOffsets:
        """The earliest available offset (low watermark) of each topic-partition."""
        from confluent_kafka.admin import OffsetSpec as KafkaOffsetSpec

        return self._list_offsets(list(tps), KafkaOffsetSpec.earliest(), "earliest")

    def latest_offsets(self, tps: Iterable[TopicPartitionId]) -> PartitionOffsets:
        """The true end offset of each topic-partition (see the module docstring)."""
        from confluent_kafka.admin import OffsetSpec as KafkaOffsetSpec

        reported = self._list_offsets(list(tps), KafkaOffsetSpec.latest(), "latest")
        ends: PartitionOffsets = {}
        to_probe: PartitionOffsets = {}
        for tp, high in reported.items():
            known = self._probed_ends.get(tp)
            if high <= 0:
                ends[tp] = high
            elif known is not None and known[0] == high and time.monotonic() - known[2] < PROBED_END_TTL_S:
                ends[tp] = known[1]
            else:
                to_probe[tp] = high
        if to_probe:
            probed, complete = self._probe_tails(to_probe)
            for tp, high in to_probe.items():
                ends[tp] = max(high, probed.get(tp, high))
                if tp in complete:
                    self._probed_ends[tp] = (high, ends[tp], time.monotonic())
                else:
                    logger.warning(
                        "could not read to the end of %s-%s within %ss; using offset %s as its end "
                        "for now (the rest is read in a later micro-batch)",
                        tp[0],
                        tp[1],
                        TAIL_PROBE_TIMEOUT_S,
                        ends[tp],
                    )
            logger.debug("probed end offsets %s (reported high watermarks %s)", probed, to_probe)
        return ends

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartitionId], option: str) -> PartitionOffsets:
        """Turn a ``startingOffsets``/``endingOffsets`` value into offsets for ``tps``.

        Args:
            spec: The option's value.
            tps: The subscribed topic-partitions.
            option: The option's name, for errors.

        Raises:
            ConfigError: If a JSON value does not list exactly the subscribed partitions.
        """
        if spec.kind == "earliest":
            return self.earliest_offsets(tps)
        if spec.kind == "latest":
            return self.latest_offsets(tps)
        given = spec.offsets()
        missing, extra = sorted(set(tps) - set(given)), sorted(set(given) - set(tps))
        if missing or extra:
            raise ConfigError(
                f"option {option!r} must give an offset for exactly the subscribed topic-partitions; "
                f"missing: {_names(missing) or 'none'}; "
                f"not subscribed or not existing: {_names(extra) or 'none'}",
                hint="use -2 for earliest and -1 for latest, e.g. "
                + str({t: {str(p): -2} for t, p in (missing or extra)[:2]}).replace("'", '"'),
                option=option,
            )
        earliest = self.earliest_offsets([tp for tp, o in given.items() if o == EARLIEST])
        latest = self.latest_offsets([tp for tp, o in given.items() if o == LATEST])
        resolved = {EARLIEST: earliest, LATEST: latest}
        return {tp: resolved[o][tp] if o in resolved else o for tp, o in given.items()}

    def close(self) -> None:
        """Close the clients (safe to call twice)."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        self._admin = None

    def _probe_tails(self, highs: PartitionOffsets) -> tuple[PartitionOffsets, set[TopicPartitionId]]:
        """Read from ``high - 1`` to the end of each partition.

        Returns:
            The end offsets seen, and the partitions whose end was confirmed by an
            end-of-partition event.
        """
        from confluent_kafka import KafkaError, TopicPartition

        consumer = self._consumer_client()
        consumer.assign([TopicPartition(t, p, high - 1) for (t, p), high in highs.items()])
        ends: PartitionOffsets = {}
        pending = set(highs)
        complete: set[TopicPartitionId] = set()
        deadline = time.monotonic() + TAIL_PROBE_TIMEOUT_S
        try:
            while pending and time.monotonic() < deadline:
                for message in consumer.consume(_TAIL_PROBE_BATCH, timeout=_TAIL_PROBE_POLL_S):
                    tp = (message.topic(), message.partition())
                    if tp not in pending:
                        continue
                    error = message.error()
                    if error is None:
                        ends[tp] = max(ends.get(tp, 0), message.offset() + 1)
                    elif error.code() == KafkaError._PARTITION_EOF:
                        # An event left over from an earlier assignment would be below high.
                        if message.offset() >= highs[tp]:
                            ends[tp] = max(ends.get(tp, 0), message.offset())
                            pending.discard(tp)
                            complete.add(tp)
                    else:
                        logger.warning("reading the tail of %s-%s failed: %s", tp[0], tp[1], error.str())
                        pending.discard(tp)
                        ends.pop(tp, None)
        finally:
            consumer.unassign()
        return ends, complete

    def _list_offsets(self, tps: list[TopicPartitionId], spec: Any, what: str) -> PartitionOffsets:
        if not tps:
            return {}
        from confluent_kafka import IsolationLevel, TopicPartition

        committed = dict(self._options.kafka_params).get("isolation.level") == "read_committed"
        isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED

        def query(timeout_s: float) -> PartitionOffsets:
            futures = self._admin_client().list_offsets(
                {TopicPartition(t, p): spec for t, p in tps},
                isolation_level=isolation,
                request_timeout=timeout_s,
            )
            return {(tp.topic, tp.partition): f.result(timeout_s + 1).offset for tp, f in futures.items()}

        return self._retry(f"list the {what} offsets of {_names(tps)}", query)

    def _retry(self, what: str, call: Callable[[float], T]) -> T:
        """``call(timeout_s)`` until it answers: ``fetchOffset.numRetries`` tries within ``brokerTimeoutMs``.

        Each attempt gets an equal share of the time, so the last one fails by the deadline.
        """
        from confluent_kafka import KafkaException

        attempts = self._options.fetch_offset_num_retries
        budget_s = self._options.broker_timeout_ms / 1000
        pause_s = min(self._options.fetch_offset_retry_interval_ms / 1000, budget_s / (2 * attempts))
        deadline = time.monotonic() + budget_s
        for attempt in range(1, attempts + 1):
            remaining = deadline - time.monotonic()
            timeout_s = max(min(REQUEST_TIMEOUT_S, remaining / (attempts - attempt + 1) - pause_s), 0.1)
            try:
                return call(timeout_s)
            except (KafkaException, TimeoutError) as e:  # TimeoutError: a future not resolved in time
                if attempt == attempts or time.monotonic() + pause_s >= deadline:
                    raise KafkaSourceError(
                        f"could not {what} after {attempt} attempts within {budget_s:g} s: {e}",
                        hint="check kafka.bootstrap.servers, the kafka.* security options and that the "
                        "brokers are up; brokerTimeoutMs (the job's kafka.broker-timeout-s) sets how long "
                        "to try, fetchOffset.numRetries the number of attempts",
                        bootstrap_servers=self._options.bootstrap_servers,
                    ) from e
                logger.warning("could not %s (attempt %s of %s): %s", what, attempt, attempts, e)
                time.sleep(pause_s)
            finally:
                if self._admin is not None:
                    self._admin.poll(0)  # hand librdkafka's log lines over (ClientLog)
        raise AssertionError("unreachable")

    def _admin_client(self) -> Any:
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self._options.admin_config())
        return self._admin

    def _consumer_client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._options.consumer_config("driver"))
        return self._consumer


def _names(tps: Iterable[TopicPartitionId]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in tps)
