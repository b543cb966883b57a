"""One streaming query of the job: the Kafka source, the decoding sink over the IcebergSink, the trigger.

:func:`run_query` starts it and waits for it to end; a failure is logged by its coded
line (:func:`failure_summary`), and a source that lost its brokers is reported in the
metrics before the query's staged batches are committed on the way out.
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

from pyspark.errors import StreamingQueryException

from icesink import ConfigError, IcebergSink, RouteBy, SinkIdentity, SinkMetrics, route_label
from icesink.jobs.kafka.decode import DecodingSink, ValueDecoder
from icesink.jobs.kafka.decoding_source import register_decoding_source
from icesink.jobs.kafka.job.config import JobConfig
from icesink.jobs.kafka.job.kafka_settings import Flavor
from icesink.jobs.kafka.job.stop import POLL_S, StopRequest
from icesink.jobs.kafka.jvm_source import jvm_source_options, source_failure
from icesink.jobs.kafka.source.kafka_errors import KafkaSourceError
from icesink.jobs.kafka.source.kafka_options import KafkaSourceOptions
from icesink.jobs.kafka.source.kafka_sample import LatestRecords
from icesink.jobs.kafka.source.kafka_select import JVM_FORMAT, kafka_format

logger = logging.getLogger(__name__)

FAILED = 1  # the exit code of a failed query
_CODED_LINE = re.compile(r"^(?:[\w.]+: )?(ICESINK-[A-Z0-9-]+: .*)$", re.MULTILINE)


def run_query(config: JobConfig, spark: Any, metrics: SinkMetrics | None, stop: StopRequest) -> int:
    """Start one streaming query of ``config`` and wait for it to end; the exit code."""
    try:
        fmt = kafka_format(spark, config.kafka.source)
        flavor: Flavor = "jvm" if fmt == JVM_FORMAT else "python"
        decoder = ValueDecoder(config.value.decode_options())
        options = config.kafka.source_options(flavor, spark.sparkContext.defaultParallelism)
        if flavor == "jvm":
            options = jvm_source_options(options)
        kafka_options = dict(options)  # without the decoding source's
        if flavor == "python" and config.kafka.decode_in_source and decoder.decodes_in_source:
            fmt = register_decoding_source(spark)  # the values cross to the JVM once, decoded
            options.update(decoder.source_options())
        stream = spark.readStream.format(fmt).options(**options).load()
        sink = IcebergSink.from_options(config.sink_options(), metrics)
        latest = _latest_records(sink, flavor, kafka_options)
        decoding = DecodingSink(
            sink,
            decoder,
            write_in_source=config.kafka.write_in_source,
            latest_records=latest.read if latest is not None else None,
        )
        decoding.prepare()
    except ConfigError as e:
        print(f"icesink-kafka-to-iceberg: {e}", file=sys.stderr)
        return 2
    writer = stream.writeStream.foreachBatch(decoding).option(
        "checkpointLocation", config.checkpoint_location
    )
    if config.query_name:
        writer = writer.queryName(config.query_name)
    if config.trigger.available_now:
        writer = writer.trigger(availableNow=True)
    elif config.trigger.interval is not None:
        writer = writer.trigger(processingTime=config.trigger.interval)
    query = None
    try:
        query = writer.start()
        logger.info("query %s reads %s into %s", query.id, fmt, decoding.label)
        while not query.awaitTermination(POLL_S):
            if stop.requested:
                logger.info("stopping query %s (signal %s)", query.id, stop.requested)
                query.stop()
    except StreamingQueryException as e:
        failure = source_failure(e, options) if flavor == "jvm" else None
        logger.error("query failed: %s", failure or failure_summary(str(e)))
        logger.info("the query's failure in full: %s", e)
        lost = failure is not None or f"ICESINK-{KafkaSourceError.code}:" in str(e)
        if query is not None and lost:
            _source_lost(sink, decoding.label, str(query.id))
        return FAILED
    finally:
        _close(sink)
        if latest is not None:
            latest.close()
    return 0


def _source_lost(sink: IcebergSink, label: str, query_id: str) -> None:
    """No broker answered the query's source: ``icesink_source_connected`` 0, the lag unknown (NaN).

    Labelled as the query's batches were, or, when it failed before its first batch, with
    the sink id its batches would have had.
    """
    identity = sink.metrics.sink_of_query(query_id) or SinkIdentity(label, sink.config.sink_id or query_id)
    sink.metrics.record_source_lost(identity)


def failure_summary(text: str) -> str:
    """The coded error a failure's text holds (its last ``ICESINK-...`` line), or its first line.

    Spark wraps an error of the source or the sink in its own, with Python tracebacks:
    the coded line says what failed and the fix, so it is what the job logs first.
    """
    coded = _CODED_LINE.findall(text)
    if coded:
        return str(coded[-1]).strip()
    return text.strip().splitlines()[0] if text.strip() else text


def _latest_records(sink: IcebergSink, flavor: Flavor, options: dict[str, str]) -> LatestRecords | None:
    """The reader of new topics' latest records, for a job routing by topic (the DecodingSink decides)."""
    if flavor != "python" or sink.config.route.by is not RouteBy.TOPIC:
        return None
    return LatestRecords(KafkaSourceOptions.from_options(options))


def _close(sink: IcebergSink) -> None:
    """Commit what the query staged before the process ends (the next run would, later)."""
    try:
        sink.close()
    except Exception as e:
        label = sink.config.table or route_label(sink.config.route)
        logger.error("staged batches of %s stay staged for the next run: %s", label, e)
