"""What the sink asks of the Spark session, answered for classic Spark and Spark Connect alike.

Under Spark Connect the ``foreachBatch`` function runs in a Python process of the server
with a Connect session: there is no ``SparkContext`` and no ``DataFrame.rdd``. Each
question the sink asks has a classic answer (unchanged) and a Connect answer here:

- the application id (caches keyed per Spark application): ``spark.app.id`` from the
  session's configuration;
- the default parallelism (how many tasks write a bucket shuffle):
  ``spark.default.parallelism`` when set, else ``spark.sql.shuffle.partitions``;
- the streaming query's id (the sink id unless ``sink-id`` is set): a local property of
  the query's thread, which Connect does not expose, so the ``sink-id`` option is
  required there;
- the session that started the query (the one whose listeners hear of it): the query's
  record, shared by the application's sessions; none under Connect;
- the number of partitions of a batch: unknown without planning it through ``rdd``, so
  ``None`` (the rule that needs it is skipped); likewise the bytes a batch's plan expects
  to read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from icesink.errors import ConfigError

logger = logging.getLogger(__name__)

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


def local_cores(spark: SparkSession) -> int | None:
    """The cores of a local-mode application (``local[N]``, all on this machine), else ``None``:
    a cluster's executors, or a Spark Connect server's, may be machines of their own."""
    if is_connect(spark) or not (spark.sparkContext.master or "").startswith("local"):
        return None
    return max(1, spark.sparkContext.defaultParallelism)


def num_partitions(df: DataFrame) -> int | None:
    """The number of Spark partitions of ``df`` (plans it), or ``None`` under Spark Connect."""
    if is_connect(df.sparkSession):
        return None
    return df.rdd.getNumPartitions()


def planned_input_bytes(df: DataFrame) -> int | None:
    """The bytes ``df``'s plan expects to read, when its sources know them before any is read.

    A file relation (``spark.read`` of files) knows the bytes of its files, listed when the plan
    was made; so does a file source's micro-batch, which ``foreachBatch`` hands over as the rows
    of a plan already made, with that plan's statistics. Any other source's plan has a guess
    of Spark's, or none: ``None`` then (a range, rows made in Python), and Spark's default of
    more bytes than any budget for a Kafka batch. ``None`` under Spark Connect too (no plan in
    this process to ask).
    """
    if is_connect(df.sparkSession):
        return None
    try:
        plan = df._jdf.queryExecution().analyzed()  # made with the DataFrame: no optimizer run
        leaves = plan.collectLeaves()
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            kind = leaf.getClass().getSimpleName()
            if kind == "LogicalRelation" and leaf.relation().getClass().getSimpleName() == "HadoopFsRelation":
                continue
            if kind != "LogicalRDD":
                return None
        return int(str(plan.stats().sizeInBytes())) if leaves.size() else None  # a BigInt, or an int
    except Exception:  # Spark's internals: a version without them only keeps the shuffle
        logger.debug("the plan of a batch could not be sized", exc_info=True)
        return None


def query_id_of(batch_df: DataFrame) -> str | None:
    """The id of the streaming query that produced ``batch_df``.

    ``None`` outside a streaming query, and always under Spark Connect (which does not tell).
    """
    spark = batch_df.sparkSession
    if is_connect(spark):
        return None
    return spark.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)


def query_session(batch_df: DataFrame) -> SparkSession | None:
    """The session that started the streaming query of ``batch_df``: the one whose listeners hear of it.

    A session's streaming listeners hear only of the queries that session started.
    ``foreachBatch`` hands each batch over on a clone of that session, made for the query,
    and ``SparkSession.getActiveSession()`` is no answer either: pyspark keeps one active
    session per process, replaced by every ``createDataFrame`` on any session, so after a
    ``foreachBatch`` function made a DataFrame on its batch's session it is that clone, a
    clone of an earlier query's session as likely as not. The query's own record, shared
    by every session of the application, names the session that started it.

    ``None`` outside a streaming query, once the query stopped, and under Spark Connect.
    """
    try:
        execution = streaming_query_of(batch_df)
        if execution is None:
            return None
        return SparkSession(batch_df.sparkSession.sparkContext, execution.sparkSession())
    except Exception:  # internals of Spark: a version without them only loses the listeners
        logger.warning(
            "the session that started query %s was not found", query_id_of(batch_df), exc_info=True
        )
        return None


def streaming_query_of(batch_df: DataFrame) -> Any:
    """The running streaming query of ``batch_df``, as Spark's own record of it (its
    ``StreamExecution``, through py4j), shared by every session of the application; ``None``
    outside a streaming query, once the query stopped, and under Spark Connect.

    Raises:
        Exception: Spark's internals differ (a version without them): the caller decides.
    """
    query_id = query_id_of(batch_df)
    if query_id is None:
        return None
    spark = batch_df.sparkSession
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    queries = spark._jsparkSession.sharedState().activeStreamingQueries()
    return queries.get(jvm.java.util.UUID.fromString(query_id))


def session_key(spark: SparkSession) -> str:
    """The identity of ``spark``'s session in the JVM (Python wrappers of one session come and go)."""
    try:
        return str(spark._jsparkSession.sessionUUID())
    except Exception:
        return f"python-{id(spark)}"


def is_stopped(spark: SparkSession) -> bool:
    """Whether ``spark``'s application has stopped (its listeners went with it)."""
    return spark.sparkContext._jsc is None


@contextmanager
def local_property(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` for the jobs this thread starts in the block, then as it was.

    Spark hands a job's local properties to its tasks (SQL settings among them, which
    its tasks read from there). Classic Spark only: Connect has no ``SparkContext``.
    """
    context = spark.sparkContext
    before = context.getLocalProperty(key)
    context.setLocalProperty(key, value)
    try:
        yield
    finally:
        context.setLocalProperty(key, before)  # type: ignore[arg-type]  # None unsets


def sink_id_of(batch_df: DataFrame, configured: str | None) -> str:
    """The configured sink id, else the streaming query's id.

    Raises:
        ConfigError: Neither is known (the sink was called outside a streaming query, or
            through Spark Connect, which does not tell the query's id).
    """
    if configured:
        return configured
    if is_connect(batch_df.sparkSession):
        raise ConfigError(
            "no sink id: under Spark Connect the sink cannot learn the streaming query's id "
            "and 'sink-id' is not set",
            hint="set the 'sink-id' option to a name unique to the query and stable across its "
            "restarts (e.g. 'orders-ingest')",
        )
    query_id = query_id_of(batch_df)
    if not query_id:
        raise ConfigError(
            "no sink id: the sink was called outside a streaming query and 'sink-id' is not set",
            hint="set the 'sink-id' option (e.g. 'orders-ingest') when calling the sink directly",
        )
    return query_id
