"""icesink.progress: a sink records its query's progress by itself, whichever session is active.

pyspark keeps one active session per process, replaced by every ``createDataFrame``:
after a ``foreachBatch`` function made a DataFrame on its batch's session (as the upsert
lookup does), the active session is that query's clone, whose listeners hear of no query.
Two Kafka queries in a row on the tests' shared session: the second one's sink records
the progress, its Kafka lag included, without anyone registering a listener.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from icesink.spark_session import session_key
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_streams import run_json_topic
from tests.support.processes import wait_until

RECORDS_PER_PARTITION = {0: 130, 1: 110}
ROWS = sum(RECORDS_PER_PARTITION.values())
ROWS_PER_BATCH = 100
VALUE_SCHEMA = st.StructType([st.StructField("id", st.LongType())])
LISTENER_TIMEOUT_S = 60.0  # bounds a wait: the listener bus delivers progress asynchronously


def _sample(sink: IcebergSink, name: str) -> float:
    return sum(s.value for m in sink.metrics.registry.collect() for s in m.samples if s.name == name)


def test_the_next_query_records_its_progress_and_kafka_lag_without_registering_a_listener(
    spark: Any, apache_kafka: KafkaBroker, topic_name: str, catalog_options: dict[str, str], tmp_path: Path
) -> None:
    apache_kafka.create_topic(topic_name, partitions=len(RECORDS_PER_PARTITION))
    records = [
        (p, str(i).encode(), json.dumps({"id": p * 10_000 + i}).encode())
        for p, count in RECORDS_PER_PARTITION.items()
        for i in range(count)
    ]
    apache_kafka.produce(topic_name, records, linger_ms=20)

    def makes_a_frame_on_its_batch_session(batch_df: Any, batch_id: int) -> None:
        batch_df.sparkSession.createDataFrame([(batch_id,)], "batch_id long").collect()

    run_json_topic(
        spark,
        apache_kafka,
        topic_name,
        VALUE_SCHEMA,
        makes_a_frame_on_its_batch_session,
        tmp_path / "first",
        rows_per_batch=ROWS_PER_BATCH,
    )
    active = SparkSession.getActiveSession()
    assert active is not None and session_key(active) != session_key(spark)  # the first query's clone

    sink = IcebergSink.from_options({**catalog_options, "table": "db.events", "metrics.port": "0"})
    lags: list[float] = []

    def write(batch_df: Any, batch_id: int) -> None:
        if batch_id == 1:  # batch 0's progress (Kafka lag above zero) arrives after batch 0 ended
            lags.append(
                wait_until(
                    lambda: _sample(sink, "icesink_source_offsets_behind_latest"),
                    LISTENER_TIMEOUT_S,
                    "the lag after the first batch",
                )
            )
        sink(batch_df, batch_id)

    try:
        run_json_topic(
            spark,
            apache_kafka,
            topic_name,
            VALUE_SCHEMA,
            write,
            tmp_path / "second",
            rows_per_batch=ROWS_PER_BATCH,
        )
        wait_until(
            lambda: _sample(sink, "icesink_input_rows_total") == ROWS,
            LISTENER_TIMEOUT_S,
            f"{ROWS} input rows in the progress metrics",
        )
        batches = _sample(sink, "icesink_batch_duration_seconds_count")
    finally:
        sink.close()
    assert len(lags) == 1 and lags[0] > 0  # the lag after batch 0
    assert batches == -(-ROWS // ROWS_PER_BATCH)  # one progress report per micro-batch
    assert sink.catalog.load_table("db.events").scan().to_arrow().num_rows == ROWS
