"""SparkSession for the jobs: local by default, anything ``spark-submit`` passes otherwise."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from sink.write.allocator import executor_environment


def get_spark(app_name: str, master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The job's SparkSession.

    Python workers must run the driver's interpreter (the virtual environment's), or
    they cannot import pyarrow; ``PYSPARK_PYTHON`` is set to it unless already set. They
    start with jemalloc as Arrow's pool (:func:`sink.write.allocator.executor_environment`)
    unless ``conf`` or the environment chooses one (a ``spark-submit --conf`` of it is
    overridden: the builder's settings come after).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master or "SPARK_MASTER" in os.environ or not os.environ.get("SPARK_HOME"):
        builder = builder.master(master or os.environ.get("SPARK_MASTER", "local[*]"))
    builder = builder.config("spark.ui.showConsoleProgress", "false").config(
        "spark.sql.session.timeZone", "UTC"
    )
    for key, value in (executor_environment() | (conf or {})).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
