"""``IcebergSink.close()``: what is staged is committed, the metrics server stops, the sink is done."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icesink import IcebergSink
from icesink.errors import SinkClosedError
from tests.support.tables import catalog_from_options

ROWS = 50


def frame(spark: SparkSession, batch_id: int) -> DataFrame:
    return spark.range(batch_id * ROWS, (batch_id + 1) * ROWS).select("id", F.lit("x").alias("v"))


def table_ids(options: dict[str, str]) -> list[int]:
    table = catalog_from_options(options).load_table(options["table"])
    return sorted(table.scan().to_arrow().column("id").to_pylist())


def test_close_commits_staged_batches_and_refuses_later_use(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {**catalog_options, "table": "db.closing", "sink-id": "closing", "commit.max-batches": "10"}
    sink = IcebergSink.from_options(options)
    sink(frame(spark, 0), 0)
    sink(frame(spark, 1), 1)
    assert table_ids(options) == []  # staged, not yet committed

    sink.close()
    sink.close()  # a second close does nothing

    assert table_ids(options) == list(range(2 * ROWS))
    with pytest.raises(SinkClosedError, match="ICESINK-CLOSED"):
        sink(frame(spark, 2), 2)
    with pytest.raises(SinkClosedError):
        sink.flush()


def test_with_block_commits_an_available_now_query(
    spark: SparkSession, catalog_options: dict[str, str], tmp_path: object
) -> None:
    source = f"{tmp_path}/source"
    spark.range(0, 300).repartition(3).write.parquet(source)
    options = {**catalog_options, "table": "db.avnow", "commit.max-batches": "100"}
    with IcebergSink.from_options(options) as sink:
        query = (
            spark.readStream.schema("id long")
            .option("maxFilesPerTrigger", 1)
            .parquet(source)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", f"{tmp_path}/checkpoint")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    assert table_ids(options) == list(range(300))  # nothing left staged when the block ends


def test_the_listener_commits_only_once_the_listener_bus_delivers_the_end(
    spark: SparkSession, catalog_options: dict[str, str], tmp_path: object
) -> None:
    """Without close(), the query's end commits the staged batches from Spark's listener bus.

    That bus is asynchronous: ``awaitTermination()`` returns when the query has stopped,
    not when listeners have heard of it. Waiting for the bus to drain (an internal of
    Spark's, used here only to show where the commit comes from) makes them visible.
    """
    source = f"{tmp_path}/source"
    spark.range(0, 200).repartition(2).write.parquet(source)
    options = {**catalog_options, "table": "db.listened", "commit.max-batches": "100"}
    sink = IcebergSink.from_options(options)
    query = (
        spark.readStream.schema("id long")
        .option("maxFilesPerTrigger", 1)
        .parquet(source)
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", f"{tmp_path}/checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(120_000)  # a busy shared session drains slowly
    assert table_ids(options) == list(range(200))
    sink.close()


def test_close_stops_the_metrics_server(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    options = {**catalog_options, "table": "db.served", "metrics.port": "0", "metrics.host": "127.0.0.1"}
    sink = IcebergSink.from_options(options)
    server = sink.metrics_server
    assert server is not None
    with urllib.request.urlopen(server.url, timeout=10) as answer:
        assert answer.status == 200
    sink.close()
    assert sink.metrics_server is None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=10)
