"""The JVM artifacts ``make env`` fetches, and where they are: Spark's Kafka source, Apache Kafka, Apicurio.

Spark's Kafka source (``spark-sql-kafka-0-10``, with ``spark-avro``) is not part of
pyspark: ``make env`` copies it, for the installed pyspark's version exactly, with the
dependencies pyspark's own ``jars/`` lacks (``kafka-clients``, ``commons-pool2``, Spark's
Kafka token provider), into :func:`spark_kafka_folder`. The Kafka job hands them to its
session with ``spark.jars`` when it reads with Spark's source
(:func:`with_spark_kafka_jars`); ``spark-submit --packages`` or ``spark.jars`` of one's
own do the same elsewhere. Apache Kafka itself (``kafka_2.13``, a KRaft broker and
controller) goes into :func:`kafka_broker_folder`, for the tests' broker, and Apicurio
Registry, built into a runnable Quarkus application, into :func:`apicurio_registry_folder`,
for the tests' schema registry.

``python -m icesink.jobs.fetch_jvm_jars`` fills them (:mod:`icesink.jobs.fetch_jvm_jars`);
the folders live under the virtual environment (``<venv>/share/icesink/jars``), so a clean
clone fills them once. ``ICESINK_JARS`` names another root folder.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

ENV_VARIABLE = "ICESINK_JARS"
SPARK_JARS = "spark.jars"
SPARK_PACKAGES = "spark.jars.packages"
KAFKA_PROVIDER_JAR = "spark-sql-kafka-0-10_"
"""The start of the name of the jar holding Spark's Kafka source."""
COMPLETE_MARKER = ".complete"
"""A file :mod:`icesink.jobs.fetch_jvm_jars` writes last, holding what the folder was made from."""


def jars_root() -> Path:
    """The folder holding the fetched artifacts' folders."""
    chosen = os.environ.get(ENV_VARIABLE)
    return Path(chosen) if chosen else Path(sys.prefix) / "share" / "icesink" / "jars"


def spark_version() -> str:
    """The installed pyspark's version: Spark's JVM artifacts must have exactly this one."""
    return metadata.version("pyspark")


def spark_kafka_folder() -> Path:
    """Spark's Kafka source and ``spark-avro`` for the installed pyspark, and their missing dependencies."""
    return jars_root() / f"spark-kafka-{spark_version()}"


def kafka_broker_folder() -> Path:
    """Apache Kafka's jars (broker, controller, tools) with their dependencies."""
    return jars_root() / "kafka-broker"


def apicurio_registry_folder() -> Path:
    """Apicurio Registry as Quarkus builds it (``quarkus-run.jar`` and the folders it reads)."""
    return jars_root() / "apicurio-registry"


def jars_in(folder: Path) -> list[Path]:
    """The jars of ``folder`` in name order; none when it is missing or was never completed."""
    if not (folder / COMPLETE_MARKER).is_file():
        return []
    return sorted(folder.glob("*.jar"))


def spark_kafka_jars() -> list[Path]:
    """The jars Spark needs for ``format("kafka")`` and ``from_avro``; empty when not fetched."""
    return jars_in(spark_kafka_folder())


def with_spark_kafka_jars(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the fetched Spark Kafka jars added to ``spark.jars``.

    Unchanged when ``conf`` already names a Kafka connector (in ``spark.jars`` or
    ``spark.jars.packages``) or when none was fetched (the session then has only what
    ``spark-submit`` gave it, and choosing Spark's source fails with a hint).
    """
    given = conf.get(SPARK_JARS, "")
    if KAFKA_PROVIDER_JAR in given or KAFKA_PROVIDER_JAR.rstrip("_") in conf.get(SPARK_PACKAGES, ""):
        return conf
    jars = spark_kafka_jars()
    if not jars:
        return conf
    listed = [j for j in given.split(",") if j.strip()] + [str(j) for j in jars]
    return conf | {SPARK_JARS: ",".join(listed)}
