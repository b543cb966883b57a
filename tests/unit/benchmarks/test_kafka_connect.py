"""The Kafka job against Kafka Connect benchmark: its summary and the Iceberg sink's configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._kafka_connect import IcebergSinkSettings
from benchmarks.kafka_connect import CONNECT, ICESINK, summarize


def _run(contender: str, round_no: int, per_s: float, per_cpu_s: float) -> dict[str, Any]:
    figures = {"messages_per_s": per_s, "messages_per_cpu_s": per_cpu_s}
    return {"contender": contender, "round": round_no, **figures}


def test_the_ratios_are_taken_within_each_round_and_their_median_reported() -> None:
    runs = [
        _run(CONNECT, 1, 100.0, 50.0),
        _run(ICESINK, 1, 300.0, 100.0),
        _run(ICESINK, 2, 100.0, 40.0),
        _run(CONNECT, 2, 200.0, 10.0),
        _run(ICESINK, 3, 150.0, 90.0),
        _run(CONNECT, 3, 100.0, 30.0),
    ]
    summary = summarize(runs)
    assert summary[ICESINK] == {"median_messages_per_s": 150, "median_messages_per_cpu_s": 90}
    assert summary[CONNECT] == {"median_messages_per_s": 100, "median_messages_per_cpu_s": 30}
    assert summary["ratio_messages_per_s"] == {"median": 1.5, "rounds": [3.0, 0.5, 1.5]}
    assert summary["ratio_messages_per_cpu_s"] == {"median": 3.0, "rounds": [2.0, 4.0, 3.0]}


def test_the_sink_writes_through_iceberg_javas_jdbc_catalog_on_the_jobs_sqlite_file() -> None:
    settings = IcebergSinkSettings(
        name="sink-1",
        topic="events",
        table="bench.connect_1",
        control_topic="control-1",
        catalog_name="default",
        catalog_file=Path("/data/catalog.db"),
        warehouse=Path("/data/warehouse"),
        tasks=2,
        commit_interval_ms=1000,
    )
    properties = settings.connector_properties()
    assert properties["iceberg.catalog"] == "default"
    assert properties["iceberg.catalog.catalog-impl"] == "org.apache.iceberg.jdbc.JdbcCatalog"
    assert properties["iceberg.catalog.uri"] == "jdbc:sqlite:/data/catalog.db"
    assert properties["iceberg.catalog.warehouse"] == "file:///data/warehouse"
    assert (properties["iceberg.control.topic"], properties["tasks.max"]) == ("control-1", "2")
