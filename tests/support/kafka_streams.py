"""A Kafka topic of JSON values streamed through ``foreachBatch``, for tests with a real broker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.jobs.kafka.source.kafka import register_kafka_source

QUERY_TIMEOUT_S = 120


class Broker(Protocol):
    """A broker of the tests (Apache Kafka)."""

    @property
    def bootstrap_servers(self) -> str: ...


def run_json_topic(
    spark: Any,
    broker: Broker,
    topic: str,
    value_schema: st.StructType,
    write_batch: Callable[[Any, int], None],
    checkpoint: Path,
    *,
    rows_per_batch: int,
) -> None:
    """Stream ``topic`` from start to end into ``write_batch``, ``rows_per_batch`` records a micro-batch.

    The values are JSON objects, parsed into the columns of ``value_schema``; the query runs
    with ``trigger(availableNow=True)`` through the ``icesink-kafka`` source, and its failure
    is raised.
    """
    stream = (
        spark.readStream.format(register_kafka_source(spark))
        .option("kafka.bootstrap.servers", broker.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(rows_per_batch))
        .load()
        .select(F.from_json(F.col("value").cast("string"), value_schema).alias("v"))
        .select("v.*")
    )
    query = (
        stream.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), f"the stream did not finish in {QUERY_TIMEOUT_S}s"
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
