"""Kafka offsets as data: the JSON Spark checkpoints, rate limits, and offset ranges.

Everything here is pure: no broker, no Spark. The driver-side reader
(:mod:`icesink.jobs.kafka.source.kafka_offset_reader`) fetches offsets, the stream reader in
:mod:`icesink.jobs.kafka.source.kafka` combines them with these functions, and executors read the
resulting :class:`OffsetRange` objects (:mod:`icesink.jobs.kafka.source.kafka_range_reader`).

The offset JSON is the one of Spark's own Kafka source, ``{"topic": {"0": 23, "1": 42}}``:
the next offset to read per partition. Spark compares two offsets of a Python source as
JSON text to decide whether there is new data, so :func:`offsets_to_json` always orders
topics by name and partitions by number.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from icesink.jobs.kafka.source.kafka_errors import report_data_loss

TopicPartitionId = tuple[str, int]
"""A Kafka topic-partition: (topic, partition)."""

PartitionOffsets = dict[TopicPartitionId, int]
"""An offset per topic-partition."""

EARLIEST = -2
"""In a ``startingOffsets``/``endingOffsets`` JSON: the partition's earliest offset (as in Spark)."""

LATEST = -1
"""In a ``startingOffsets``/``endingOffsets`` JSON: the partition's latest offset (as in Spark)."""


def offsets_to_json(offsets: Mapping[TopicPartitionId, int]) -> dict[str, dict[str, int]]:
    """Turn offsets into Spark's Kafka offset JSON object, in a canonical order.

    Args:
        offsets: The offset per topic-partition.

    Returns:
        ``{"topic": {"partition": offset}}`` with topics and partitions sorted.
    """
    result: dict[str, dict[str, int]] = {}
    for topic, partition in sorted(offsets):
        result.setdefault(topic, {})[str(partition)] = int(offsets[(topic, partition)])
    return result


def offsets_from_json(value: Any) -> PartitionOffsets:
    """Parse Spark's Kafka offset JSON object (partition keys arrive as strings).

    Args:
        value: The decoded JSON, ``{"topic": {"0": 23}}``.

    Returns:
        The offset per topic-partition.

    Raises:
        ValueError: If the value does not have that shape.
    """
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object of topics, got {type(value).__name__}")
    offsets: PartitionOffsets = {}
    for topic, partitions in value.items():
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic names must be non-empty strings, got {topic!r}")
        if not isinstance(partitions, Mapping):
            raise ValueError(f"topic {topic!r} must map partition numbers to offsets, got {partitions!r}")
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except (TypeError, ValueError):
                raise ValueError(f"partition {partition!r} of topic {topic!r} is not a number") from None
            if number < 0:
                raise ValueError(f"partition {partition!r} of topic {topic!r} is negative")
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise ValueError(f"offset {offset!r} of {topic}-{number} is not an integer")
            offsets[(topic, number)] = offset
    return offsets


@dataclass(frozen=True)
class OffsetRange:
    """The records ``[start, end)`` of one topic-partition: the work of one Spark task.

    Attributes:
        topic: Topic name.
        partition: Partition number.
        start: First offset to read.
        end: Offset after the last one to read.
    """

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """The number of offsets in the range (records, unless the log has gaps)."""
        return max(0, self.end - self.start)


def rate_limit(
    max_offsets: int, start: Mapping[TopicPartitionId, int], latest: Mapping[TopicPartitionId, int]
) -> PartitionOffsets:
    """Cap the end offsets so that at most ``max_offsets`` offsets are read in total.

    Like Spark's ``maxOffsetsPerTrigger``: the limit is shared among the partitions in
    proportion to what each has to read; a partition with anything to read gets at
    least one offset, so small partitions are not starved by big ones.

    Args:
        max_offsets: The limit (``maxOffsetsPerTrigger``).
        start: Where each partition's read begins (new partitions: their earliest offset).
        latest: The latest available offset of each partition.

    Returns:
        The end offset of each partition of ``latest``.
    """
    backlog = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = sum(backlog.values())
    if total <= max_offsets:
        return dict(latest)
    ends: PartitionOffsets = {}
    for tp, end in latest.items():
        if tp not in backlog:
            ends[tp] = end
            continue
        share = max_offsets * backlog[tp] / total
        allowed = math.ceil(share) if share < 1 else math.floor(share)
        ends[tp] = min(end, start[tp] + allowed)
    return ends


def plan_ranges(
    start: Mapping[TopicPartitionId, int],
    end: Mapping[TopicPartitionId, int],
    new_partition_starts: Mapping[TopicPartitionId, int],
    *,
    fail_on_data_loss: bool,
) -> list[OffsetRange]:
    """The non-empty ranges between two offsets of the stream, reporting lost data.

    Args:
        start: The start offset of the micro-batch.
        end: Its end offset. Partitions missing from ``start`` are new since then.
        new_partition_starts: Where each new partition begins (its earliest offset).
        fail_on_data_loss: The ``failOnDataLoss`` option.

    Returns:
        One range per topic-partition with something to read, sorted.

    Raises:
        KafkaDataLossError: If data was lost and ``fail_on_data_loss`` is true.
    """
    gone = sorted(set(start) - set(end))
    if gone:
        report_data_loss(
            f"topic-partitions {_names(gone)} are gone from Kafka; the records after their last "
            "read offsets may have been lost",
            fail_on_data_loss=fail_on_data_loss,
        )
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        topic, partition = tp
        if tp in start:
            begin = start[tp]
        elif tp in new_partition_starts:
            begin = new_partition_starts[tp]
            if begin != 0:
                report_data_loss(
                    f"new topic-partition {topic}-{partition} starts at offset {begin} instead of 0; "
                    "the records before it were deleted before the stream saw the partition",
                    fail_on_data_loss=fail_on_data_loss,
                    topic=topic,
                    partition=partition,
                )
        else:
            continue
        if end[tp] < begin:
            report_data_loss(
                f"the latest offset of {topic}-{partition} went back from {begin} to {end[tp]}; "
                "records may have been missed",
                fail_on_data_loss=fail_on_data_loss,
                topic=topic,
                partition=partition,
            )
        elif end[tp] > begin:
            ranges.append(OffsetRange(topic, partition, begin, end[tp]))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split big ranges so that there are about ``min_partitions`` of them (``minPartitions``).

    Each range gets a number of pieces in proportion to its size (at least one), and its
    pieces are of near-equal size, as in Spark's Kafka source.

    Args:
        ranges: The ranges of one micro-batch.
        min_partitions: The wanted number of Spark partitions, or None to keep one per
            topic-partition.

    Returns:
        The ranges, split where needed.
    """
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    pieces: list[OffsetRange] = []
    for r in ranges:
        count = max(1, round(r.size * min_partitions / total))
        bounds = [r.start + r.size * i // count for i in range(count + 1)]
        pieces.extend(
            OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo
        )
    return pieces


def pack_ranges(ranges: list[OffsetRange], max_partitions: int | None) -> list[tuple[OffsetRange, ...]]:
    """Group the ranges into at most ``max_partitions`` Spark partitions (``maxPartitions``).

    A Spark task costs tens of milliseconds whatever it reads, so a micro-batch of
    hundreds of small ranges (one per topic of a pattern subscription) spends more on
    tasks than on records. Packing is longest-processing-time first: the ranges, largest
    first, each go to the partition with the fewest offsets so far, which keeps the
    partitions within one range's size of each other. Each partition lists its ranges
    in topic, partition and offset order, and the grouping depends on the ranges alone,
    so a replayed micro-batch reads the same records in the same tasks.

    Args:
        ranges: The ranges of one micro-batch (already split for ``minPartitions``).
        max_partitions: The most Spark partitions wanted, or None for one per range.

    Returns:
        The ranges of each Spark partition.
    """
    if max_partitions is None or len(ranges) <= max_partitions:
        return [(r,) for r in ranges]
    order = sorted(ranges, key=lambda r: (-r.size, r.topic, r.partition, r.start))
    loads = [(0, i) for i in range(max_partitions)]  # (offsets so far, partition): a min-heap
    groups: list[list[OffsetRange]] = [[] for _ in range(max_partitions)]
    for r in order:
        load, i = heapq.heappop(loads)
        groups[i].append(r)
        heapq.heappush(loads, (load + r.size, i))
    return [tuple(sorted(g, key=lambda r: (r.topic, r.partition, r.start))) for g in groups if g]


def resolve_read_start(offset_range: OffsetRange, low_watermark: int, *, fail_on_data_loss: bool) -> int:
    """Where a task should start reading, given the partition's earliest available offset.

    Args:
        offset_range: The range the task must read.
        low_watermark: The earliest offset still in Kafka.
        fail_on_data_loss: The ``failOnDataLoss`` option.

    Returns:
        ``offset_range.start``, or the low watermark if retention deleted the records
        before it (then the caller reads nothing if it is at or after the range's end).

    Raises:
        KafkaDataLossError: If records of the range were deleted and ``fail_on_data_loss``.
    """
    if offset_range.start >= low_watermark:
        return offset_range.start
    report_data_loss(
        f"offsets [{offset_range.start}, {min(low_watermark, offset_range.end)}) of "
        f"{offset_range.topic}-{offset_range.partition} were deleted before they were read "
        f"(the earliest available offset is {low_watermark})",
        fail_on_data_loss=fail_on_data_loss,
        topic=offset_range.topic,
        partition=offset_range.partition,
    )
    return low_watermark


def _names(tps: Iterable[TopicPartitionId]) -> str:
    return ", ".join(f"{topic}-{partition}" for topic, partition in tps)
