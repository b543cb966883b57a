"""The job's process: the command line to an exit code, and a failed query started again.

:func:`main` is ``icesink-kafka-to-iceberg`` (and ``python -m icesink.jobs.kafka.job``);
:func:`run` runs a validated configuration, on a SparkSession of its own or the caller's.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any

from icesink import ConfigError, SinkMetrics
from icesink.jobs.jvm_jars import with_spark_kafka_jars
from icesink.jobs.kafka.job.cli import load_config
from icesink.jobs.kafka.job.config import JobConfig
from icesink.jobs.kafka.job.query import FAILED, run_query
from icesink.jobs.kafka.job.stop import StopRequest
from icesink.jobs.spark import get_spark, with_c1_only

logger = logging.getLogger(__name__)

_FIRST_RESTART_DELAY_S = 1.0
_MAX_RESTART_DELAY_S = 30.0


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
    spark = get_spark(config.spark.app_name, config.spark.master, session_conf(config))
    try:
        return _run(config, spark, metrics)
    finally:
        spark.stop()


def session_conf(config: JobConfig) -> dict[str, str]:
    """The Spark settings of the job's own session: ``spark.conf`` of ``config``, the jars of
    Spark's Kafka connector for the JVM source, and a driver JVM that compiles with C1 only
    (:func:`icesink.jobs.spark.with_c1_only`: a new job's start costs much less CPU)."""
    conf = dict(config.spark.conf)
    if config.kafka.source == "jvm":
        conf = with_spark_kafka_jars(conf)
    return with_c1_only(conf)


def _run(config: JobConfig, spark: Any, metrics: SinkMetrics | None) -> int:
    """Run the query, and with ``max-restarts`` start a failed one again from its checkpoint.

    A restart is a new query on the same checkpoint, with a new sink that settles what the
    failed one left staged, exactly as a new process would: a batch whose commit landed is
    skipped by the sink's ledger, one that had not is written again. The waits before the
    restarts double from one second, up to half a minute; a signal ends them.
    """
    stop = StopRequest()
    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        restarts = 0
        while True:
            code = run_query(config, spark, metrics, stop)
            if code != FAILED or stop.requested or restarts >= config.max_restarts:
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
