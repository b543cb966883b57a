"""The ``table`` label bounded to ``metrics.max-tables`` tables; the rest under ``_other``."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from icesink import ConfigError, SinkConfig
from icesink.metric_labels import DEFAULT_MAX_TABLES, OTHER_TABLES_LABEL, TableLabelLimit
from icesink.metrics import SinkMetrics


def _tables_in(registry: CollectorRegistry) -> set[str]:
    text = generate_latest(registry).decode()
    return {line.split('table="', 1)[1].split('"', 1)[0] for line in text.splitlines() if 'table="' in line}


def test_tables_past_the_limit_share_the_other_series_and_warn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CollectorRegistry()
    metrics = SinkMetrics(registry=registry, max_tables=3)
    caplog.set_level(logging.WARNING, logger="icesink.metric_labels")
    for i in range(5):
        metrics.start_sink(f"raw.t{i}", "s1")
        metrics.rows_written.labels(f"raw.t{i}", "s1").inc(10)
        metrics.schema_checks.labels(f"raw.t{i}", "unchanged").inc()  # a family without sink_id
    assert _tables_in(registry) == {"raw.t0", "raw.t1", "raw.t2", OTHER_TABLES_LABEL}
    for table in ("raw.t0", "raw.t1", "raw.t2"):
        labels = {"table": table, "sink_id": "s1"}
        assert registry.get_sample_value("icesink_rows_written_total", labels) == 10
    other = {"table": OTHER_TABLES_LABEL, "sink_id": "s1"}
    assert registry.get_sample_value("icesink_rows_written_total", other) == 20
    assert (
        registry.get_sample_value(
            "icesink_schema_checks_total", {"table": OTHER_TABLES_LABEL, "outcome": "unchanged"}
        )
        == 2
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "metrics.max-tables" in warnings[0] and "3" in warnings[0] and "raw.t3" in warnings[0]


def test_a_table_seen_before_the_limit_keeps_its_series() -> None:
    limit = TableLabelLimit(max_tables=2)
    assert [limit.label(t) for t in ("a.x", "a.y", "a.z", "a.x", "a.y")] == [
        "a.x",
        "a.y",
        OTHER_TABLES_LABEL,
        "a.x",
        "a.y",
    ]
    assert limit.tables() == frozenset({"a.x", "a.y"})


def test_keyword_labels_are_bounded_too() -> None:
    registry = CollectorRegistry()
    metrics = SinkMetrics(registry=registry, max_tables=1)
    metrics.rows_written.labels(table="a.x", sink_id="s").inc()
    metrics.rows_written.labels(table="a.y", sink_id="s").inc(2)
    assert _tables_in(registry) == {"a.x", OTHER_TABLES_LABEL}


def test_the_limit_is_an_option_with_a_default() -> None:
    assert SinkConfig.from_options({"table": "db.t"}).metrics.max_tables == DEFAULT_MAX_TABLES
    assert SinkConfig.from_options({"table": "db.t", "metrics.max-tables": "50"}).metrics.max_tables == 50
    with pytest.raises(ConfigError, match=r"metrics\.max-tables"):
        SinkConfig.from_options({"table": "db.t", "metrics.max-tables": "0"})
