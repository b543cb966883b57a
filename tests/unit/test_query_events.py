"""Every sink of a session hears query events through ONE listener, which holds them weakly."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from icesink import IcebergSink
from icesink.query_events import listener_of, subscribe, unsubscribe

BUS_TIMEOUT_MS = 120_000  # bounds a wait: the shared session's listener bus may be busy


class Recorder:
    def __init__(self) -> None:
        self.progress: list[str] = []
        self.terminated: list[str] = []

    def on_progress(self, event: Any) -> None:
        self.progress.append(str(event.progress.id))

    def on_idle(self, query_id: str) -> None:
        pass

    def on_terminated(self, query_id: str) -> None:
        self.terminated.append(query_id)


class Failing(Recorder):
    def on_terminated(self, query_id: str) -> None:
        raise RuntimeError("a sink's handler failing")


def listeners(spark: SparkSession) -> int:
    return len(spark._jsparkSession.streams().listListeners())


def test_many_handlers_share_one_listener_and_a_dropped_one_is_not_called(
    spark: SparkSession, tmp_path: Path
) -> None:
    before = listeners(spark)
    gc.collect()  # earlier tests' dropped sinks leave the session's listener now, not in the count below
    earlier = listener_of(spark)
    others = 0 if earlier is None else len(earlier)
    kept = [Recorder() for _ in range(5)]
    dropped, failing = Recorder(), Failing()
    for handler in [*kept, dropped, failing]:
        subscribe(spark, handler)
        subscribe(spark, handler)  # idempotent
    assert listeners(spark) <= before + 1  # one for the session, none if a sink added it already
    unsubscribed = kept.pop()
    unsubscribe(spark, unsubscribed)
    dropped_log = dropped.terminated
    del dropped
    gc.collect()
    listener = listener_of(spark)
    assert listener is not None and len(listener) == others + 5  # 4 kept and the failing one

    spark.range(0, 10).write.parquet(str(tmp_path / "source"))
    query = (
        spark.readStream.schema("id long")
        .parquet(str(tmp_path / "source"))
        .writeStream.foreachBatch(lambda df, batch_id: None)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(BUS_TIMEOUT_MS)

    query_id = str(query.id)
    for handler in kept:  # the failing handler before or after them stopped none of them
        assert handler.progress == [query_id] and handler.terminated == [query_id]
    assert unsubscribed.terminated == [] and dropped_log == []
    for handler in [*kept, failing]:
        unsubscribe(spark, handler)


def test_sinks_of_one_session_add_no_listener_of_their_own(
    spark: SparkSession, catalog_options: dict[str, str], tmp_path: Path
) -> None:
    """Three sinks with a commit cadence (progress metrics and flush on the query's end) under one query."""
    sinks = [
        IcebergSink.from_options({**catalog_options, "table": f"db.t{i}", "commit.max-batches": "10"})
        for i in range(3)
    ]

    def write(df: Any, batch_id: int) -> None:
        for sink in sinks:
            sink(df, batch_id)

    spark.range(0, 10).write.parquet(str(tmp_path / "source"))
    before = listeners(spark)
    query = (
        spark.readStream.schema("id long")
        .parquet(str(tmp_path / "source"))
        .writeStream.foreachBatch(write)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(BUS_TIMEOUT_MS)
    assert listeners(spark) <= before + 1
    catalog = sinks[0].catalog
    for i, sink in enumerate(sinks):  # the query's end, heard once, committed each sink's staged batch
        assert catalog.load_table(f"db.t{i}").scan().to_arrow().num_rows == 10
        sink.close()
