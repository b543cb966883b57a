"""What the sink asks of the Spark session, answered for classic Spark and Spark Connect alike.

Under Spark Connect the ``foreachBatch`` function runs in a Python process of the server
with a Connect session: there is no ``SparkContext`` and no ``DataFrame.rdd``. Each
question the sink asks has a classic answer (unchanged) and a Connect answer here:

- the application id (caches keyed per Spark application): ``spark.app.id`` from the
  session's configuration;
- the default parallelism (how many tasks write a bucket shuffle):
  ``spark.default.parallelism`` when set, else ``spark.sql.shuffle.partitions``;
- the streaming query's id: a local property of the query's thread, which Connect does
  not expose, so the ``sink-id`` option is required there;
- the number of partitions of a batch: unknown without planning it through ``rdd``, so
  ``None`` (the rule that needs it is skipped).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

_QUERY_ID_PROPERTY = "sql.streaming.queryId"


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``SparkContext`` behind it)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def application_id(spark: SparkSession) -> str:
    """The id of the Spark application ``spark`` belongs to."""
    if is_connect(spark):
        return spark.conf.get("spark.app.id") or "spark-connect"
    return spark.sparkContext.applicationId


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the application runs at once by default (at least 1)."""
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    configured = spark.conf.get("spark.default.parallelism", None)
    if not configured:
        configured = spark.conf.get("spark.sql.shuffle.partitions", None)
    return max(1, int(configured)) if configured else 1


def num_partitions(df: DataFrame) -> int | None:
    """The number of Spark partitions of ``df`` (plans it), or ``None`` under Spark Connect."""
    if is_connect(df.sparkSession):
        return None
    return df.rdd.getNumPartitions()


def query_id_of(batch_df: DataFrame) -> str | None:
    """The id of the streaming query that produced ``batch_df``.

    ``None`` outside a streaming query, and always under Spark Connect (which does not tell).
    """
    spark = batch_df.sparkSession
    if is_connect(spark):
        return None
    return spark.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
