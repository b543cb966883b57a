"""Executor side of the Kafka source: read one offset range into Arrow record batches.

A task reads exactly the records with offsets in ``[start, end)`` of one partition,
each once: it assigns the partition (no group join, no commits), drops anything below
the next expected offset, and stops at the first record at or after ``end``, so an
``end`` that is short of the partition's real end (Tansu's under-reported high
watermark, a rate limit) is respected to the record. It also stops when the consumer's
end-of-partition event shows the fetch position at or past ``end``, which covers ranges
whose last offsets hold no record (compaction, transaction markers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
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

from streaming_jobs.kafka.source.kafka_errors import KafkaSourceError
from streaming_jobs.kafka.source.kafka_offsets import OffsetRange, resolve_read_start
from streaming_jobs.kafka.source.kafka_options import KafkaSourceOptions

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


def read_range(
    options: KafkaSourceOptions, offset_range: OffsetRange, batch_rows: int = ARROW_BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Read the records of ``offset_range`` as record batches of :data:`ARROW_SCHEMA`.

    Args:
        options: The source's options (consumer configuration, ``failOnDataLoss``,
            ``kafkaConsumer.pollTimeoutMs``).
        offset_range: The range to read.
        batch_rows: Rows per record batch.

    Yields:
        Record batches in offset order.

    Raises:
        KafkaDataLossError: If records of the range were deleted and ``failOnDataLoss``.
        KafkaSourceError: If the broker fails, or no record arrives for
            ``kafkaConsumer.pollTimeoutMs``.
    """
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    topic, partition = offset_range.topic, offset_range.partition
    consumer = Consumer(options.consumer_config("executor"))
    try:
        try:
            low, _ = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=REQUEST_TIMEOUT_S
            )
        except KafkaException as e:
            raise KafkaSourceError(
                f"could not get the earliest offset of {topic}-{partition}: {e}",
                topic=topic,
                partition=partition,
            ) from e
        start = resolve_read_start(offset_range, low, fail_on_data_loss=options.fail_on_data_loss)
        if start >= offset_range.end:
            return
        consumer.assign([TopicPartition(topic, partition, start)])
        yield from _consume(consumer, offset_range, start, options.poll_timeout_ms / 1000, batch_rows)
    finally:
        consumer.close()


def _consume(
    consumer: Any, offset_range: OffsetRange, start: int, poll_timeout_s: float, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    from confluent_kafka import KafkaError

    topic, partition, end = offset_range.topic, offset_range.partition, offset_range.end
    batch = _BatchBuilder(topic, partition)
    expected = start  # the lowest offset that may still be emitted
    fetch_position = start  # a lower bound of the consumer's fetch position
    skipped = 0
    last_progress = time.monotonic()
    while expected < end and fetch_position < end:
        progressed = False
        keys, values, offsets, stamps = batch.columns
        for message in consumer.consume(min(end - expected, batch_rows), timeout=_CONSUME_TIMEOUT_S):
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaSourceError(
                        f"reading {topic}-{partition} at offset {expected} failed: {error.str()}",
                        topic=topic,
                        partition=partition,
                    )
                if message.offset() > fetch_position:
                    fetch_position = message.offset()
                    progressed = True
                continue
            offset = message.offset()
            if offset < expected:
                continue
            if offset >= end:
                expected = end
                break
            skipped += offset - expected
            # The hot loop: plain list appends, columns are built once per record batch.
            keys.append(message.key())
            values.append(message.value())
            offsets.append(offset)
            stamps.append(message.timestamp())
            expected = offset + 1
            progressed = True
            if len(offsets) >= batch_rows:
                yield batch.flush()
                keys, values, offsets, stamps = batch.columns
        now = time.monotonic()
        if progressed:
            last_progress = now
        elif expected < end and fetch_position < end and now - last_progress > poll_timeout_s:
            raise KafkaSourceError(
                f"no record of {topic}-{partition} arrived for {poll_timeout_s:.0f}s while reading offsets "
                f"[{expected}, {end})",
                hint="check the brokers; kafkaConsumer.pollTimeoutMs sets this timeout",
                topic=topic,
                partition=partition,
            )
    if batch.rows:
        yield batch.flush()
    if skipped:
        logger.info(
            "%s offsets of %s-%s in [%s, %s) hold no record (compaction or transaction markers)",
            skipped,
            topic,
            partition,
            start,
            end,
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
