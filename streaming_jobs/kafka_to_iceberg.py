"""``icesink-kafka-to-iceberg``: stream Kafka topics into Apache Iceberg tables, exactly once.

::

    icesink-kafka-to-iceberg --config job.yaml [flags that override it]
    python -m streaming_jobs.kafka_to_iceberg --bootstrap-servers broker:9092 --topics orders \\
        --table analytics.orders --sink-option catalog.uri=... --checkpoint-location /ck/orders
    python -m streaming_jobs.kafka_to_iceberg ... --topic-pattern 'shop\\..*' \\
        --route-by topic --table-template 'raw.{topic}'      # one table per topic

The configuration (:mod:`streaming_jobs.kafka_config`, read by
:mod:`streaming_jobs.kafka_cli`; routing: :mod:`streaming_jobs.kafka_routing`) is
validated before Spark starts. Then: the Kafka source (Spark's connector, or
``icesink-kafka-decoded``: ``icesink-kafka`` decoding the values where it reads them;
``kafka.source: jvm`` hands the session the connector's jars that ``make env`` fetched,
:mod:`streaming_jobs.jvm_jars`, and a failure of the connector is reported as
``ICESINK-KAFKA-SOURCE``, :mod:`streaming_jobs.kafka.jvm_source`), a
:class:`~streaming_jobs.kafka.decode.sink.DecodingSink` (JSON or Debezium values into typed rows,
undecodable values to the dead-letter table) over an
:class:`~sink.sink.IcebergSink`, and the checkpoint. SIGTERM and SIGINT stop the
query between micro-batches; whatever a commit cadence left staged is committed on
the way out. With ``max-restarts``, a query that fails is started again from its
checkpoint, that many times at most.
"""

from __future__ import annotations

import logging
import re
import signal
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from pyspark.errors import StreamingQueryException

from icesink import ConfigError, IcebergSink, SinkMetrics
from sink.config_route import RouteBy, route_label
from sink.metrics import SinkIdentity
from streaming_jobs.jvm_jars import with_spark_kafka_jars
from streaming_jobs.kafka.decode import DecodingSink, ValueDecoder
from streaming_jobs.kafka.decoding_source import register_decoding_source
from streaming_jobs.kafka.jvm_source import jvm_source_options, source_failure
from streaming_jobs.kafka.source.kafka_errors import KafkaSourceError
from streaming_jobs.kafka.source.kafka_options import KafkaSourceOptions
from streaming_jobs.kafka.source.kafka_sample import LatestRecords
from streaming_jobs.kafka.source.kafka_select import JVM_FORMAT, kafka_format
from streaming_jobs.kafka_cli import load_config
from streaming_jobs.kafka_config import Flavor, JobConfig
from streaming_jobs.spark import get_spark

logger = logging.getLogger(__name__)

_POLL_S = 2.0
_FAILED = 1  # the exit code of a failed query
_FIRST_RESTART_DELAY_S = 1.0
_MAX_RESTART_DELAY_S = 30.0
_CODED_LINE = re.compile(r"^(?:[\w.]+: )?(ICESINK-[A-Z0-9-]+: .*)$", re.MULTILINE)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job until its query ends (``availableNow``) or it is stopped; the exit code."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(argv)
    except ConfigError as e:
        print(f"icesink-kafka-to-iceberg: {e}", file=sys.stderr)
        return 2
    return run(config)


def run(config: JobConfig, spark: Any = None, metrics: SinkMetrics | None = None) -> int:
    """Start the streaming query of ``config`` and wait for it; the exit code.

    Args:
        config: The validated configuration.
        spark: A SparkSession to use; by default one is created from ``config.spark``.
        metrics: Where the sink records its metrics (a registry of its own by default);
            they stay readable after the job ended, when the sink no longer serves them.
    """
    if spark is not None:
        return _run(config, spark, metrics)
    conf = dict(config.spark.conf)
    if config.kafka.source == "jvm":
        conf = with_spark_kafka_jars(conf)
    spark = get_spark(config.spark.app_name, config.spark.master, conf)
    try:
        return _run(config, spark, metrics)
    finally:
        spark.stop()


def _run(config: JobConfig, spark: Any, metrics: SinkMetrics | None) -> int:
    """Run the query, and with ``max-restarts`` start a failed one again from its checkpoint.

    A restart is a new query on the same checkpoint, with a new sink that settles what the
    failed one left staged, exactly as a new process would: a batch whose commit landed is
    skipped by the sink's ledger, one that had not is written again. The waits before the
    restarts double from one second, up to half a minute; a signal ends them.
    """
    stop = _StopRequest()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        restarts = 0
        while True:
            code = _run_query(config, spark, metrics, stop)
            if code != _FAILED or stop.requested or restarts >= config.max_restarts:
                return code
            restarts += 1
            delay = min(_FIRST_RESTART_DELAY_S * 2 ** (restarts - 1), _MAX_RESTART_DELAY_S)
            logger.warning(
                "starting the query again from its checkpoint in %.0f s (restart %s of %s)",
                delay,
                restarts,
                config.max_restarts,
            )
            if stop.wait(delay):
                return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_query(config: JobConfig, spark: Any, metrics: SinkMetrics | None, stop: _StopRequest) -> int:
    """Start one streaming query of ``config`` and wait for it to end; the exit code."""
    try:
        fmt = kafka_format(spark, config.kafka.source)
        flavor: Flavor = "jvm" if fmt == JVM_FORMAT else "python"
        decoder = ValueDecoder(config.value.decode_options())
        options = config.kafka.source_options(flavor, spark.sparkContext.defaultParallelism)
        if flavor == "jvm":
            options = jvm_source_options(options)
        kafka_options = dict(options)  # without the decoding source's
        if flavor == "python" and config.kafka.decode_in_source:
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
        while not query.awaitTermination(_POLL_S):
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
        return _FAILED
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


class _StopRequest:
    """A signal handler that only notes the signal: the query is stopped from the main loop."""

    def __init__(self) -> None:
        self.requested: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = signum

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if a signal comes; whether one came."""
        deadline = time.monotonic() + seconds
        while self.requested is None and time.monotonic() < deadline:
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
        return self.requested is not None


if __name__ == "__main__":
    raise SystemExit(main())
