"""Executor side of the Kafka source: read a task's offset ranges into Arrow record batches.

A task reads exactly the records with offsets in ``[start, end)`` of each of its ranges,
each once, through one consumer: it assigns the ranges' partitions at their starts (no
group join, no commits), drops anything below a range's next expected offset, and ends a
range at its first record at or after ``end``, so an ``end`` that is short of the
partition's real end (Tansu's under-reported high watermark, a rate limit) is respected
to the record; the partition is then paused. A range also ends when the consumer's
end-of-partition event shows the fetch position at or past ``end``, which covers ranges
whose last offsets hold no record (compaction, transaction markers).

Records may be deleted while a range is read (DeleteRecords, retention): the broker then
refuses the next fetch as out of range. The reader asks for the partition's low watermark
and treats the offsets below it as lost, exactly as at the range's start
(:func:`resolve_read_start`: ``ICESINK-KAFKA-DATA-LOSS`` with ``failOnDataLoss``, otherwise a
warning and the rest of the range from the low watermark); the records already fetched
are kept, each once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from icesink.jobs.kafka.source.kafka_errors import KafkaSourceError
from icesink.jobs.kafka.source.kafka_offsets import OffsetRange, resolve_read_start
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions

logger = logging.getLogger(__name__)

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
)
"""The schema of Spark's built-in Kafka source (without headers)."""

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
)
""":data:`KAFKA_SCHEMA` as PySpark converts it to Arrow: what ``read()`` must yield."""

ARROW_BATCH_ROWS = 10_000
REQUEST_TIMEOUT_S = 30.0
_CONSUME_TIMEOUT_S = 0.5


def read_ranges(
    options: KafkaSourceOptions, ranges: Sequence[OffsetRange], batch_rows: int = ARROW_BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Read the records of ``ranges`` through one consumer, as record batches of :data:`ARROW_SCHEMA`.

    The ranges of distinct partitions are assigned together and read as their records
    arrive; a partition's further ranges (pieces of a split range packed into one task)
    are read in later rounds. A Kafka client per range costs a connection and a
    metadata request each: 10 to 20 ms, a second per task of 50 small ranges.

    Args:
        options: The source's options (consumer configuration, ``failOnDataLoss``,
            ``kafkaConsumer.pollTimeoutMs``).
        ranges: The ranges to read.
        batch_rows: Rows per record batch at most.

    Yields:
        Record batches of one range each, a range's in offset order.

    Raises:
        KafkaDataLossError: If records of a range were deleted and ``failOnDataLoss``.
        KafkaSourceError: If the broker fails, or no record of a range still being read
            arrives for ``kafkaConsumer.pollTimeoutMs``.
    """
    from confluent_kafka import Consumer

    consumer = Consumer(options.consumer_config("executor"))
    try:
        for round_ranges in _rounds(ranges):
            readers = [reader for r in round_ranges if (reader := _start(consumer, options, r, batch_rows))]
            if readers:
                yield from _consume(consumer, readers, options, batch_rows)
    finally:
        consumer.close()


def _rounds(ranges: Sequence[OffsetRange]) -> list[list[OffsetRange]]:
    """``ranges`` in rounds of at most one range per partition, each partition's in offset order."""
    by_partition: dict[tuple[str, int], list[OffsetRange]] = {}
    for r in sorted(ranges, key=lambda r: r.start):
        by_partition.setdefault((r.topic, r.partition), []).append(r)
    rounds: list[list[OffsetRange]] = []
    for pieces in by_partition.values():
        for n, piece in enumerate(pieces):
            if n == len(rounds):
                rounds.append([])
            rounds[n].append(piece)
    return rounds


def _start(
    consumer: Any, options: KafkaSourceOptions, offset_range: OffsetRange, batch_rows: int
) -> _RangeReader | None:
    """The reader of ``offset_range`` from its first offset still in Kafka; ``None`` if none is."""
    low = _low_watermark(consumer, offset_range.topic, offset_range.partition)
    start = resolve_read_start(offset_range, low, fail_on_data_loss=options.fail_on_data_loss)
    if start >= offset_range.end:
        return None
    return _RangeReader(offset_range, start, batch_rows)


def _low_watermark(consumer: Any, topic: str, partition: int) -> int:
    """The earliest offset of a partition still in Kafka, asked of the broker."""
    from confluent_kafka import KafkaException, TopicPartition

    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S)
    except KafkaException as e:
        raise KafkaSourceError(
            f"could not get the earliest offset of {topic}-{partition}: {e}",
            topic=topic,
            partition=partition,
        ) from e
    return int(low)


def _skip_deleted(consumer: Any, reader: _RangeReader, fail_on_data_loss: bool) -> None:
    """Go on from the low watermark after the broker refused ``reader``'s next offset as out of range.

    Raises:
        KafkaDataLossError: The offsets were deleted and ``fail_on_data_loss``.
        KafkaSourceError: The offset is not below the low watermark (the partition was
            truncated or recreated shorter): nothing to skip to.
    """
    from confluent_kafka import TopicPartition

    refused, reader.refused = reader.refused, None
    low = _low_watermark(consumer, reader.topic, reader.partition)
    if low <= reader.expected:
        raise KafkaSourceError(
            f"reading {reader.topic}-{reader.partition} at offset {reader.expected} failed: {refused}",
            topic=reader.topic,
            partition=reader.partition,
        )
    rest = OffsetRange(reader.topic, reader.partition, reader.expected, reader.end)
    reader.expected = resolve_read_start(rest, low, fail_on_data_loss=fail_on_data_loss)
    if not reader.done:  # the partition stopped on the error: a seek is refused, a new assignment is not
        consumer.incremental_unassign([TopicPartition(reader.topic, reader.partition)])
        consumer.incremental_assign([TopicPartition(reader.topic, reader.partition, reader.expected)])


def _consume(
    consumer: Any, readers: list[_RangeReader], options: KafkaSourceOptions, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import TopicPartition

    poll_timeout_s = options.poll_timeout_ms / 1000
    assigned = [TopicPartition(r.topic, r.partition, r.start) for r in readers]
    consumer.assign(assigned)
    consumer.resume(assigned)  # a partition paused in an earlier round stays paused through unassign
    pending = {(r.topic, r.partition): r for r in readers}
    last_progress = time.monotonic()
    try:
        while pending:
            progressed = False
            for message in consumer.consume(batch_rows, timeout=_CONSUME_TIMEOUT_S):
                reader = pending.get((message.topic(), message.partition()))
                if reader is None:
                    continue  # prefetched past the end of a range already read
                progressed |= reader.take(message)
                if reader.refused is not None:
                    _skip_deleted(consumer, reader, options.fail_on_data_loss)
                if reader.full:
                    yield reader.flush()
                if reader.done:
                    if reader.rows:
                        yield reader.flush()
                    reader.log_skipped()
                    del pending[(reader.topic, reader.partition)]
                    consumer.pause([TopicPartition(reader.topic, reader.partition)])
            now = time.monotonic()
            if progressed:
                last_progress = now
            elif pending and now - last_progress > poll_timeout_s:
                raise _stalled(list(pending.values()), poll_timeout_s)
    finally:
        consumer.unassign()


def _stalled(readers: list[_RangeReader], poll_timeout_s: float) -> KafkaSourceError:
    first = readers[0]
    waiting = ", ".join(f"{r.topic}-{r.partition} [{r.expected}, {r.end})" for r in readers[:5])
    return KafkaSourceError(
        f"no record of {len(readers)} range(s) arrived for {poll_timeout_s:.0f}s; still to read: {waiting}",
        hint="check the brokers; kafkaConsumer.pollTimeoutMs sets this timeout",
        topic=first.topic,
        partition=first.partition,
    )


class _RangeReader:
    """The records of one offset range read so far, and where its reading stands.

    ``expected`` is the lowest offset that may still be taken and ``fetch_position`` a
    lower bound of the consumer's position in the partition (from end-of-partition
    events); the range is read when either reaches its end. ``refused`` holds the broker's
    answer when it refused the next offset as out of range, until the caller acts on it.
    """

    def __init__(self, offset_range: OffsetRange, start: int, batch_rows: int) -> None:
        self.topic, self.partition, self.end = offset_range.topic, offset_range.partition, offset_range.end
        self.start = self.expected = self.fetch_position = start
        self.skipped = 0
        self.refused: str | None = None
        self._batch_rows = batch_rows
        self._batch = _BatchBuilder(self.topic, self.partition)

    @property
    def done(self) -> bool:
        return self.expected >= self.end or self.fetch_position >= self.end

    @property
    def rows(self) -> int:
        return self._batch.rows

    @property
    def full(self) -> bool:
        return self._batch.rows >= self._batch_rows

    def take(self, message: Any) -> bool:
        """Take one consumed message (or end-of-partition event); whether the reading progressed."""
        from confluent_kafka import KafkaError

        error = message.error()
        if error is not None:
            if error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                self.refused = error.str()  # records deleted under the reader, most likely
                return False
            if error.code() != KafkaError._PARTITION_EOF:
                raise KafkaSourceError(
                    f"reading {self.topic}-{self.partition} at offset {self.expected} failed: {error.str()}",
                    topic=self.topic,
                    partition=self.partition,
                )
            if message.offset() > self.fetch_position:
                self.fetch_position = message.offset()
                return True
            return False
        offset = message.offset()
        if offset < self.expected:
            return False
        if offset >= self.end:
            self.expected = self.end
            return True
        self.skipped += offset - self.expected
        keys, values, offsets, stamps = self._batch.columns
        keys.append(message.key())
        values.append(message.value())
        offsets.append(offset)
        stamps.append(message.timestamp())
        self.expected = offset + 1
        return True

    def flush(self) -> pa.RecordBatch:
        return self._batch.flush()

    def log_skipped(self) -> None:
        if self.skipped:
            logger.info(
                "%s offsets of %s-%s in [%s, %s) hold no record (compaction or transaction markers)",
                self.skipped,
                self.topic,
                self.partition,
                self.start,
                self.end,
            )


class _BatchBuilder:
    """Collects consumed messages column by column and turns them into a record batch.

    ``columns`` holds the keys, values, offsets and ``(timestamp type, timestamp ms)``
    pairs of the messages so far; :meth:`flush` replaces them with empty lists.
    """

    def __init__(self, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = partition
        self.columns: tuple[list[bytes | None], list[bytes | None], list[int], list[tuple[int, int]]] = (
            [],
            [],
            [],
            [],
        )

    @property
    def rows(self) -> int:
        return len(self.columns[2])

    def flush(self) -> pa.RecordBatch:
        keys, values, offsets, stamps = self.columns
        self.columns = ([], [], [], [])
        n = len(offsets)
        stamp_columns = np.array(stamps, dtype=np.int64).reshape(n, 2)
        return pa.RecordBatch.from_arrays(
            [
                pa.array(keys, pa.binary()),
                pa.array(values, pa.binary()),
                pa.array([self._topic] * n, pa.string()),
                pa.array(np.full(n, self._partition, dtype=np.int32)),
                pa.array(offsets, pa.int64()),
                pa.array(stamp_columns[:, 1] * 1000, pa.timestamp("us", tz="UTC")),
                # confluent-kafka: 0 none, 1 create time, 2 log append; Spark (Java client): -1, 0, 1.
                pa.array((stamp_columns[:, 0] - 1).astype(np.int32)),
            ],
            schema=ARROW_SCHEMA,
        )
