"""The latest records of topics, read on the driver before a micro-batch, to look at their type.

A sink routing by topic can only let the decoding tasks write a topic's records to a
table that exists (:mod:`icesink.batch.source_write`). :class:`LatestRecords` reads, for topics
the sink has no table for yet, up to :data:`SAMPLE_RECORDS` of the latest records of each
of their partitions, so that the job can make each table from its topic's own records
before the batch that reads them. The records are only looked at: the batch reads them
again as usual, and only their type is used. They are the newest when they are read,
which may be past the batch's end (a rate limit) or, with ``startingOffsets=latest``,
before its start: a table may so take a topic's type from records it never holds. A
topic is read again only once its partitions have records it did not see (an empty
topic, or one whose latest values could not be decoded, costs one offset query per
micro-batch until then).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

import pyarrow as pa

from icesink.jobs.kafka.source.kafka_offset_reader import KafkaOffsetReader
from icesink.jobs.kafka.source.kafka_offsets import OffsetRange, PartitionOffsets
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions
from icesink.jobs.kafka.source.kafka_range_reader import read_ranges

logger = logging.getLogger(__name__)

SAMPLE_RECORDS = 20
"""Records read per partition at most: the latest, where a topic's newest fields are."""


class LatestRecords:
    """Reads the latest records of the subscribed topics not yet known (see the module).

    Args:
        options: The source's options (brokers, subscription, consumer configuration).
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = replace(options, fail_on_data_loss=False)  # records deleted meanwhile: fewer to see
        self._offsets = KafkaOffsetReader(options)
        self._seen: PartitionOffsets = {}  # the end offset each partition was last read to

    def read(self, known: Iterable[str]) -> dict[str, list[pa.RecordBatch]]:
        """The latest records of each subscribed topic not in ``known`` that has new ones.

        Returns:
            Per topic, record batches of Kafka's columns (``key``, ``value``, ``topic``,
            ``partition``, ``offset``, ``timestamp``, ``timestampType``).
        """
        skip = set(known)
        tps = [tp for tp in self._offsets.topic_partitions() if tp[0] not in skip]
        if not tps:
            return {}
        ends = self._offsets.latest_offsets(tps)
        fresh = {tp: end for tp, end in ends.items() if end > self._seen.get(tp, 0)}
        if not fresh:
            return {}
        ranges = [
            OffsetRange(topic, partition, max(0, end - SAMPLE_RECORDS), end)
            for (topic, partition), end in sorted(fresh.items())
        ]  # from the first record still in Kafka, when the older are gone
        records: dict[str, list[pa.RecordBatch]] = {}
        for batch in read_ranges(self._options, ranges):
            if batch.num_rows == 0:
                continue
            records.setdefault(batch.column("topic")[0].as_py(), []).append(batch)
        self._seen.update(fresh)
        logger.info("read the latest records of %s topics: %s", len(records), sorted(records))
        return records

    def close(self) -> None:
        """Close the Kafka clients."""
        self._offsets.close()
