"""Choose the Kafka source: Spark's JVM connector where it is on the classpath, else ``icesink-kafka``.

Both take the same options and return the same columns, so a job changes nothing but
the format name. Spark's connector (``spark-sql-kafka-0-10``, added with
``--packages``, ``spark.jars.packages`` or ``spark.jars``: ``make env`` fetches its jars,
:mod:`icesink.jobs.jvm_jars`) is the first choice; the Python source
(:mod:`icesink.jobs.kafka.source.kafka`) stands in where it cannot be installed. A checkpoint keeps
the offsets of the source that wrote it: keep one source per checkpoint.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from icesink import ConfigError
from icesink.jobs.kafka.source.kafka import register_kafka_source

logger = logging.getLogger(__name__)

JVM_FORMAT = "kafka"
JVM_PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
Choice = Literal["auto", "jvm", "python"]


def jvm_kafka_available(spark: Any) -> bool:
    """Whether Spark's Kafka connector can be loaded by the session's JVM."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:  # Spark Connect: the server decides; assume the connector is not there
        return False
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(JVM_PROVIDER_CLASS, False, loader)
    except Exception:  # py4j reports ClassNotFoundException as Py4JJavaError
        return False
    return True


def kafka_format(spark: Any, choice: Choice = "auto") -> str:
    """The format name to read Kafka with: ``kafka`` (JVM connector) or ``icesink-kafka``.

    Args:
        spark: The SparkSession.
        choice: ``jvm``, ``python``, or ``auto`` (the connector when available).

    Raises:
        ConfigError: ``jvm`` was asked for and the connector is not on the classpath.
    """
    if choice == "python":
        return register_kafka_source(spark)
    available = jvm_kafka_available(spark)
    if choice == "jvm" and not available:
        version = getattr(spark, "version", "<spark version>")
        raise ConfigError(
            f"Spark's Kafka connector ({JVM_PROVIDER_CLASS}) is not on the classpath",
            hint=f"add it with --packages org.apache.spark:spark-sql-kafka-0-10_2.13:{version} (or "
            "spark.jars.packages, or spark.jars: make env fetches the jars into the virtual environment), "
            "or use the Python source: kafka.source=python",
        )
    if available:
        logger.info("reading Kafka with Spark's connector (%s)", JVM_PROVIDER_CLASS)
        return JVM_FORMAT
    logger.info("Spark's Kafka connector is not on the classpath: reading Kafka with icesink-kafka")
    return register_kafka_source(spark)
