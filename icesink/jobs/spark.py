"""SparkSession for the jobs: local by default, anything ``spark-submit`` passes otherwise."""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

from icesink import executor_environment
from icesink.jobs import class_archive
from icesink.jobs.worker_daemon import daemon_conf

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
C1_ONLY = "-XX:TieredStopAtLevel=1"
"""Compile with HotSpot's C1 only; ``-XX:TieredStopAtLevel=4`` in the driver's options keeps C2."""
_TIER_OPTIONS = ("TieredStopAtLevel", "TieredCompilation")


def get_spark(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The job's SparkSession.

    Python workers must run the driver's interpreter (the virtual environment's), or
    they cannot import pyarrow; ``PYSPARK_PYTHON`` is set to it unless already set. They
    start with jemalloc as Arrow's pool (:func:`icesink.executor_environment`)
    unless ``conf`` or the environment chooses one (a ``spark-submit --conf`` of it is
    overridden: the builder's settings come after). A driver JVM it starts maps the class
    archive when there is one (:mod:`icesink.jobs.class_archive`), its options added to
    those ``conf`` gives ``spark.driver.extraJavaOptions``. A local session's Python workers
    import the installed pyspark, not Spark's zip of it (:mod:`icesink.jobs.worker_daemon`).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master or "SPARK_MASTER" in os.environ or not os.environ.get("SPARK_HOME"):
        master = master or os.environ.get("SPARK_MASTER", "local[*]")
        builder = builder.master(master)
    builder = builder.config("spark.ui.showConsoleProgress", "false").config(
        "spark.sql.session.timeZone", "UTC"
    )
    conf = conf or {}
    for key, value in (executor_environment() | with_class_archive(conf) | daemon_conf(master, conf)).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def with_class_archive(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the class archive's options for a driver JVM not started yet."""
    return _with_driver_option(conf, class_archive.java_options())


def with_c1_only(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with :data:`C1_ONLY` for a driver JVM not started yet, unless ``conf`` chooses its tiers.

    In ``local`` mode the driver JVM runs the tasks too, and its C2 compiler was what a new
    Kafka job's JVM spent most CPU on. With C1 alone a new job spent about a third less CPU up
    to its first commit, and its micro-batches after the first cost less CPU per message, not
    more: C2's faster code did not earn back its compiling within the runs measured
    (``benchmarks/kafka_job_ab.py``; benchmarks/README.md, "The Kafka job against Iceberg's
    Kafka Connect sink"). A job that runs long on a JVM-heavy plan can keep C2:
    ``-XX:TieredStopAtLevel=4`` in ``spark.driver.extraJavaOptions``.
    """
    if any(option in conf.get(DRIVER_JAVA_OPTIONS, "") for option in _TIER_OPTIONS):
        return conf
    return _with_driver_option(conf, C1_ONLY)


def _with_driver_option(conf: dict[str, str], option: str) -> dict[str, str]:
    """``conf`` with ``option`` after the driver JVM's given options, when this process starts that JVM."""
    if not option or SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return conf
    given = conf.get(DRIVER_JAVA_OPTIONS, "").strip()
    return conf | {DRIVER_JAVA_OPTIONS: f"{given} {option}".strip()}
