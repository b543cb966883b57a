"""Streaming sources for icesink jobs.

:func:`register_kafka_source` registers ``icesink-kafka``, a Kafka source with the
options and schema of Spark's built-in ``kafka`` format, for where Spark's JVM Kafka
connector is not on the classpath.
"""

from __future__ import annotations

from icesink.jobs.kafka.source.kafka import (
    SOURCE_NAME,
    KafkaBatchReader,
    KafkaDataSource,
    KafkaInputPartition,
    KafkaStreamReader,
    register_kafka_source,
)
from icesink.jobs.kafka.source.kafka_errors import KafkaDataLossError, KafkaSourceError
from icesink.jobs.kafka.source.kafka_offset_reader import KafkaOffsetReader
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions
from icesink.jobs.kafka.source.kafka_range_reader import KAFKA_SCHEMA

__all__ = [
    "KAFKA_SCHEMA",
    "SOURCE_NAME",
    "KafkaBatchReader",
    "KafkaDataLossError",
    "KafkaDataSource",
    "KafkaInputPartition",
    "KafkaOffsetReader",
    "KafkaSourceError",
    "KafkaSourceOptions",
    "KafkaStreamReader",
    "register_kafka_source",
]
