"""SparkSession for the jobs: local by default, anything ``spark-submit`` passes otherwise."""

from __future__ import annotations

import os
import sys

from pyspark import SparkContext
from pyspark.sql import SparkSession

from icesink import executor_environment
from icesink.jobs import class_archive

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def get_spark(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The job's SparkSession.

    Python workers must run the driver's interpreter (the virtual environment's), or
    they cannot import pyarrow; ``PYSPARK_PYTHON`` is set to it unless already set. They
    start with jemalloc as Arrow's pool (:func:`icesink.executor_environment`)
    unless ``conf`` or the environment chooses one (a ``spark-submit --conf`` of it is
    overridden: the builder's settings come after). A driver JVM it starts maps the class
    archive when there is one (:mod:`icesink.jobs.class_archive`), its options added to
    those ``conf`` gives ``spark.driver.extraJavaOptions``.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master or "SPARK_MASTER" in os.environ or not os.environ.get("SPARK_HOME"):
        builder = builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    builder = builder.config("spark.ui.showConsoleProgress", "false").config(
        "spark.sql.session.timeZone", "UTC"
    )
    for key, value in (executor_environment() | with_class_archive(conf or {})).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def with_class_archive(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` with the class archive's options for a driver JVM not started yet."""
    options = class_archive.java_options()
    if not options or SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return conf
    given = conf.get(DRIVER_JAVA_OPTIONS, "").strip()
    return conf | {DRIVER_JAVA_OPTIONS: f"{given} {options}".strip()}
