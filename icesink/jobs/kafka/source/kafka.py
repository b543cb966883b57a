"""A Kafka source for Spark as a PySpark 4 Python data source, over confluent-kafka.

Spark's JVM Kafka connector is the first choice where it is on the classpath; this
source stands in where it is not, with the same options and the same output schema, so
a job switches between them by changing only the format name::

    register_kafka_source(spark)
    df = (spark.readStream.format("icesink-kafka")          # instead of "kafka"
          .option("kafka.bootstrap.servers", "broker:9092")
          .option("subscribe", "events")
          .option("maxOffsetsPerTrigger", "100000")
          .load())

How a micro-batch flows:

1. Driver, ``latestOffset(start, limit)``: list the subscribed partitions (new ones
   included), ask for their true end offsets (:class:`KafkaOffsetReader`), cap them by
   ``maxOffsetsPerTrigger`` when Spark passes that limit, and return the offset JSON
   Spark checkpoints. With ``Trigger.AvailableNow`` the ends never pass the target
   taken in ``prepareForTriggerAvailableNow``.
2. Driver, ``partitions(start, end)``: one :class:`OffsetRange` per partition (new
   partitions from their earliest offset), lost data reported per ``failOnDataLoss``,
   split further for ``minPartitions``, and packed into at most ``maxPartitions``
   Spark partitions (:func:`pack_ranges`).
3. Executors, ``read(partition)``: the ranges of the Spark partition read exactly into
   Arrow record batches through one consumer (:func:`read_ranges`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka_offset_reader import KafkaOffsetReader
from icesink.jobs.kafka.source.kafka_offsets import (
    OffsetRange,
    PartitionOffsets,
    offsets_from_json,
    offsets_to_json,
    pack_ranges,
    plan_ranges,
    rate_limit,
    split_ranges,
)
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions, check_client_config
from icesink.jobs.kafka.source.kafka_range_reader import KAFKA_SCHEMA, read_ranges

logger = logging.getLogger(__name__)

SOURCE_NAME = "icesink-kafka"


def register_kafka_source(spark: Any) -> str:
    """Register the source with a SparkSession.

    Args:
        spark: The SparkSession.

    Returns:
        The format name to use in ``spark.readStream.format(...)``: ``icesink-kafka``.
    """
    spark.dataSource.register(KafkaDataSource)
    return SOURCE_NAME


class KafkaInputPartition(InputPartition):
    """One Spark task's work: offset ranges of one or more topic-partitions (picklable).

    Args:
        ranges: The records to read, in the order they are read.
    """

    def __init__(self, ranges: tuple[OffsetRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


def _input_partitions(ranges: list[OffsetRange], options: KafkaSourceOptions) -> list[InputPartition]:
    split = split_ranges(ranges, options.min_partitions)
    return [KafkaInputPartition(group) for group in pack_ranges(split, options.max_partitions)]


class KafkaDataSource(DataSource):
    """The ``icesink-kafka`` data source: Spark's Kafka source options and schema.

    Options are validated when the DataFrame is created (``load()``), with
    :class:`~icesink.ConfigError` naming the option, its value and what is accepted.
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``icesink-kafka``."""
        return SOURCE_NAME

    def schema(self) -> StructType:
        """Spark's Kafka schema: key, value, topic, partition, offset, timestamp, timestampType."""
        check_client_config(KafkaSourceOptions.from_options(self.options))
        return KAFKA_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A reader for ``spark.readStream``."""
        return KafkaStreamReader(KafkaSourceOptions.from_options(self.options, "stream"), schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        """A reader for ``spark.read`` (from ``startingOffsets`` to ``endingOffsets``)."""
        return KafkaBatchReader(KafkaSourceOptions.from_options(self.options, "batch"), schema)


RecordTransform = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]
"""What a task does with the record batches it read before Spark gets them (picklable)."""


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader with admission control (``maxOffsetsPerTrigger``) and AvailableNow.

    Args:
        options: The validated options.
        schema: The schema Spark asks for; must be the Kafka schema.
        transform: Applied to each task's record batches (a source that yields something
            other than raw records, such as decoded values, declares that schema itself).
    """

    def __init__(
        self, options: KafkaSourceOptions, schema: StructType, transform: RecordTransform | None = None
    ) -> None:
        _check_schema(schema)
        self._options = options
        self._transform = transform
        self._offset_reader: KafkaOffsetReader | None = None
        self._available_now_target: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Executors get the reader pickled: Kafka clients are neither picklable nor needed there.
        state = dict(self.__dict__)
        state["_offset_reader"] = None
        return state

    def initialOffset(self) -> dict:
        """Offsets of a new query, from ``startingOffsets``."""
        reader = self._reader()
        offsets = reader.resolve(self._options.starting_offsets, reader.topic_partitions(), "startingOffsets")
        logger.info("Kafka source starts at %s", offsets_to_json(offsets))
        return offsets_to_json(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)``, or all available data."""
        limit = self._options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an AvailableNow run at the offsets available now."""
        self._available_now_target = self._latest_available()
        logger.info("AvailableNow run reads up to %s", offsets_to_json(self._available_now_target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end offset of the next micro-batch, within ``limit``."""
        begin = offsets_from_json(start)
        latest = self._latest_available()
        self._latest = latest
        new = [tp for tp in latest if tp not in begin]
        begins = {**begin, **self._reader().earliest_offsets(new)} if new else begin
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(limit.max_rows, begins, latest)
        else:
            if not isinstance(limit, ReadAllAvailable):
                logger.warning("read limit %s is not supported; reading all available data", limit)
            end = latest
        return offsets_to_json(end)

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets seen by the last ``latestOffset`` call (for query progress)."""
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The micro-batch's offset ranges, packed into input partitions (``maxPartitions``)."""
        begin, until = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in until if tp not in begin]
        new_starts = self._reader().earliest_offsets(new) if new else {}
        ranges = plan_ranges(begin, until, new_starts, fail_on_data_loss=self._options.fail_on_data_loss)
        partitions = _input_partitions(ranges, self._options)
        logger.debug(
            "micro-batch %s -> %s: %s ranges in %s partitions",
            json.dumps(start),
            json.dumps(end),
            len(ranges),
            len(partitions),
        )
        return partitions

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one partition's ranges (on an executor)."""
        return _read(self._options, partition, self._transform)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint, never in Kafka."""

    def stop(self) -> None:
        """Close the driver's Kafka clients."""
        if self._offset_reader is not None:
            self._offset_reader.close()
            self._offset_reader = None

    def _latest_available(self) -> PartitionOffsets:
        if self._available_now_target is not None:
            return dict(self._available_now_target)
        reader = self._reader()
        return reader.latest_offsets(reader.topic_partitions())

    def _reader(self) -> KafkaOffsetReader:
        if self._offset_reader is None:
            self._offset_reader = KafkaOffsetReader(self._options)
        return self._offset_reader


class KafkaBatchReader(DataSourceReader):
    """Batch reader: the records from ``startingOffsets`` to ``endingOffsets``.

    Args:
        options: The validated options.
        schema: The schema Spark asks for; must be the Kafka schema.
        transform: Applied to each task's record batches (see :class:`KafkaStreamReader`).
    """

    def __init__(
        self, options: KafkaSourceOptions, schema: StructType, transform: RecordTransform | None = None
    ) -> None:
        _check_schema(schema)
        self._options = options
        self._transform = transform

    def partitions(self) -> Sequence[InputPartition]:
        """The offset ranges, planned on the driver, packed into input partitions (``maxPartitions``)."""
        reader = KafkaOffsetReader(self._options)
        try:
            tps = reader.topic_partitions()
            start = reader.resolve(self._options.starting_offsets, tps, "startingOffsets")
            end = reader.resolve(self._options.ending_offsets, tps, "endingOffsets")
        finally:
            reader.close()
        ranges = plan_ranges(start, end, {}, fail_on_data_loss=self._options.fail_on_data_loss)
        return _input_partitions(ranges, self._options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one partition's ranges (on an executor)."""
        return _read(self._options, partition, self._transform)


def _read(
    options: KafkaSourceOptions, partition: InputPartition, transform: RecordTransform | None
) -> Iterator[pa.RecordBatch]:
    # Spark hands a plain InputPartition(None) to a reader that planned no partitions.
    if not isinstance(partition, KafkaInputPartition):
        return iter(())
    batches = read_ranges(options, partition.ranges)
    return transform(batches) if transform is not None else batches


def _check_schema(schema: StructType) -> None:
    if schema != KAFKA_SCHEMA:
        raise ConfigError(
            f"the Kafka source has a fixed schema; got a user-specified schema {schema.simpleString()}",
            hint=f"remove .schema(...); the source returns {KAFKA_SCHEMA.simpleString()}",
        )
