"""A Kafka stream through the sink, scraped by a real Prometheus: the metrics tell the truth.

The stream reads a topic of Apache Kafka (the session's broker) through the
``icesink-kafka`` source in several ``availableNow`` micro-batches and writes it with
``metrics.port`` on. Prometheus (Debian's package, 127.0.0.1, 200 ms scrapes, icesink's
alert rules loaded) then has to report exactly what the table holds, and every
expression of the dashboard and of the alert rules has to return a series.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import types as st

from icesink import IcebergSink
from icesink.progress import unwatch_progress, watch_progress
from tests.e2e.conftest import DASHBOARD, RULES
from tests.e2e.monitoring_files import alert_rules, dashboard_queries, for_grafana_variables
from tests.e2e.servers import PrometheusServer, wait_until
from tests.support.kafka_broker import KafkaBroker
from tests.support.kafka_streams import run_json_topic

pytestmark = pytest.mark.e2e

TABLE = "e2e.events"
RECORDS_PER_PARTITION = {0: 260, 1: 190}
ROWS = sum(RECORDS_PER_PARTITION.values())
ROWS_PER_BATCH = 160
SCRAPE_TIMEOUT_S = 120.0  # bounds a wait: a busy listener bus of the shared session delivers late
VALUE_SCHEMA = st.StructType(
    [
        st.StructField("id", st.LongType()),
        st.StructField("kind", st.StringType()),
        st.StructField("amount", st.DoubleType()),
    ]
)


def _produce(broker: KafkaBroker, topic: str) -> None:
    records = []
    for partition, count in RECORDS_PER_PARTITION.items():
        for i in range(count):
            key = partition * 10_000 + i
            value = {"id": key, "kind": f"k{key % 7}", "amount": key / 4}
            records.append((partition, str(key).encode(), json.dumps(value).encode()))
    broker.produce(topic, records, linger_ms=20)


def _table_truth(sink: IcebergSink) -> dict[str, Any]:
    table = sink.catalog.load_table(TABLE)
    files = [task.file for task in table.scan().plan_files()]
    snapshots = table.snapshots()
    markers = {k: int(v) for k, v in table.metadata.properties.items() if k.endswith(".last-batch-id")}
    assert len(markers) == 1, markers
    return {
        "rows": table.scan().to_arrow().num_rows,
        "files": len(files),
        "bytes": sum(f.file_size_in_bytes for f in files),
        "snapshots": len(snapshots),
        "last_batch_id": next(iter(markers.values())),
    }


def test_stream_metrics_reach_prometheus(
    spark: Any,
    apache_kafka: KafkaBroker,
    start_prometheus: Any,
    catalog_options: dict[str, str],
    tmp_path: Path,
    metrics_exports: None,
) -> None:
    topic = f"e2e-metrics-{time.time_ns()}"
    apache_kafka.create_topic(topic, partitions=len(RECORDS_PER_PARTITION))
    _produce(apache_kafka, topic)
    sink = IcebergSink.from_options(
        {
            **catalog_options,
            "table": TABLE,
            "partition-by": "bucket(4, id)",
            "write.target-file-size-bytes": "4096",
            "metrics.port": "0",
        }
    )
    assert sink.metrics_server is not None
    assert sink.metrics_server.host == "127.0.0.1"
    prometheus: PrometheusServer = start_prometheus([f"127.0.0.1:{sink.metrics_server.port}"])
    t = f'table="{TABLE}"'

    def write_batch(df: Any, batch_id: int) -> None:
        if batch_id == 1:
            # The first batch's progress (its Kafka lag, above zero) reaches the listener
            # after that batch ends. Holding the second batch until Prometheus has scraped
            # it makes the lag assertion below independent of how fast the batches run.
            wait_until(
                lambda: prometheus.query(f"max(icesink_source_offsets_behind_latest{{{t}}}) > 0"),
                SCRAPE_TIMEOUT_S,
                "Prometheus to scrape a Kafka lag above zero",
            )
        sink(df, batch_id)

    started = time.time()
    try:
        # The way for jobs to name the session that starts their queries; the sink registers on
        # that session by itself as well (tests/integration/test_progress.py), once per session.
        watch_progress(spark, sink.metrics)
        run_json_topic(
            spark,
            apache_kafka,
            topic,
            VALUE_SCHEMA,
            write_batch,
            tmp_path / "checkpoint",
            rows_per_batch=ROWS_PER_BATCH,
        )
        truth = _table_truth(sink)
        assert truth["rows"] == ROWS
        assert truth["snapshots"] >= 3, "maxOffsetsPerTrigger should have made several micro-batches"

        # Wait (bounded) until Prometheus has scraped the final values. The progress events
        # reach the listener asynchronously, after the query's last batch, so the listener
        # stays registered until then.
        wait_until(
            lambda: (
                prometheus.query(f"sum(icesink_rows_written_total{{{t}}}) == {ROWS}")
                and prometheus.query(f"sum(icesink_input_rows_total{{{t}}}) == {ROWS}")
            ),
            SCRAPE_TIMEOUT_S,
            "Prometheus to scrape the final counts",
        )
    finally:
        unwatch_progress(spark, sink.metrics)

    # The counts equal what the table holds.
    assert prometheus.value(f"sum(icesink_rows_written_total{{{t}}})") == truth["rows"]
    assert prometheus.value(f"sum(icesink_input_rows_total{{{t}}})") == ROWS
    assert prometheus.value(f"sum(icesink_files_written_total{{{t}}})") == truth["files"]
    assert prometheus.value(f"sum(icesink_bytes_written_total{{{t}}})") == truth["bytes"]
    assert prometheus.value(f"sum(icesink_data_file_size_bytes_count{{{t}}})") == truth["files"]
    assert prometheus.value(f"sum(icesink_data_file_size_bytes_sum{{{t}}})") == truth["bytes"]
    assert prometheus.value(f"sum(icesink_data_file_size_ratio_sum{{{t}}})") == pytest.approx(
        truth["bytes"] / 4096
    )
    assert prometheus.value(f'sum(icesink_commits_total{{{t}, outcome="committed"}})') == truth["snapshots"]
    assert prometheus.value(f'sum(icesink_commits_total{{{t}, outcome="failed"}})') == 0
    assert prometheus.value(f'sum(icesink_batches_total{{{t}, outcome="committed"}})') == truth["snapshots"]
    assert prometheus.value(f"sum(icesink_commit_attempts_total{{{t}}})") == truth["snapshots"]
    assert prometheus.value(f"max(icesink_last_committed_batch_id{{{t}}})") == truth["last_batch_id"]
    assert prometheus.value(f"sum(icesink_replays_skipped_total{{{t}}})") == 0
    assert prometheus.value(f"sum(icesink_dead_letter_rows_total{{{t}}})") == 0
    assert prometheus.value(f"max(icesink_target_file_size_bytes{{{t}}})") == 4096
    assert started <= prometheus.value(f"max(icesink_last_commit_timestamp_seconds{{{t}}})") <= time.time()
    assert prometheus.value(f"max(icesink_open_writers_max{{{t}}})") >= 1
    assert prometheus.value(f"max(icesink_buffered_bytes_max{{{t}}})") > 0
    assert (
        prometheus.value(f'sum(icesink_step_duration_seconds_count{{{t}, step="write"}})')
        == truth["snapshots"]
    )
    assert prometheus.value(f"sum(icesink_batch_duration_seconds_count{{{t}}})") == truth["snapshots"]
    # Kafka lag: behind while the first batches ran, caught up at the end.
    assert prometheus.value(f"max(max_over_time(icesink_source_offsets_behind_latest{{{t}}}[5m]))") > 0
    assert prometheus.value(f"max(icesink_source_offsets_behind_latest{{{t}}})") == 0

    # Every dashboard expression parses and returns a series for the table.
    table_regex = TABLE.replace(".", "\\\\.")
    empty = [
        (title, expr)
        for title, expr in dashboard_queries(DASHBOARD)
        if not prometheus.query(for_grafana_variables(expr, table_regex))
    ]
    assert not empty, f"dashboard expressions without data: {empty}"

    # Every alert expression parses, and its signal returns a series (firing or not).
    for rule in alert_rules(RULES):
        prometheus.query(rule.expr)
        assert prometheus.query(rule.as_bool), f"{rule.name}: no series for {rule.as_bool}"
    # The real Prometheus evaluated every rule without error; nothing fires after a healthy run.
    groups = prometheus.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {r["name"] for r in rules} == {r.name for r in alert_rules(RULES)}
    wait_until(
        lambda: all(
            r.get("lastEvaluation", "").startswith("2") for r in prometheus.api("rules")["groups"][0]["rules"]
        ),
        SCRAPE_TIMEOUT_S,
        "the rules to be evaluated",
    )
    rules = [r for g in prometheus.api("rules")["groups"] for r in g["rules"]]
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    firing = [a for a in prometheus.api("alerts")["alerts"] if a["state"] == "firing"]
    assert not firing, firing
