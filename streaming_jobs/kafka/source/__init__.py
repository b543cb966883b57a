"""Streaming sources for icesink jobs.

:func:`register_kafka_source` registers ``icesink-kafka``, a Kafka source with the
options and schema of Spark's built-in ``kafka`` format, for where Spark's JVM Kafka
connector is not on the classpath.
"""

from __future__ import annotations

from sink.sources.kafka import (
    SOURCE_NAME,
    KafkaBatchReader,
    KafkaDataSource,
    KafkaInputPartition,
    KafkaStreamReader,
    register_kafka_source,
)
from sink.sources.kafka_errors import KafkaDataLossError, KafkaSourceError
from sink.sources.kafka_offset_reader import KafkaOffsetReader
from sink.sources.kafka_options import KafkaSourceOptions
from sink.sources.kafka_range_reader import KAFKA_SCHEMA

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
