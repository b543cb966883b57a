"""SinkMetrics, the process-wide metrics endpoint, the Pushgateway pusher and the progress listener."""

from __future__ import annotations

import dataclasses
import logging
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from icesink import ConfigError, MetricsConfig, SinkConfig, metrics_server
from icesink.metric_families import (
    BATCH_OUTCOMES,
    DEAD_LETTER_REASONS,
    SCHEMA_CHANGE_KINDS,
    SCHEMA_CHECK_OUTCOMES,
    STEPS,
)
from icesink.metrics import KEPT_RECORD_COUNTS, SinkIdentity, SinkMetrics
from icesink.metrics_server import MergedRegistries, PushgatewayPusher
from icesink.progress import ProgressMetrics, offsets_behind_latest
from icesink.write.messages import DataFileMessage

MiB = 1024 * 1024


@pytest.fixture()
def exports() -> Iterator[None]:
    yield
    metrics_server.shutdown()


def _file(size: int, rows: int = 10, writers: int = 1, buffered: int = 0) -> DataFileMessage:
    return DataFileMessage(
        path=f"file:///w/{size}.parquet",
        partition=(),
        spec_id=0,
        record_count=rows,
        file_size_bytes=size,
        open_writers_peak=writers,
        buffered_bytes_peak=buffered,
    )


def _value(metrics: SinkMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


# --- SinkMetrics -----------------------------------------------------------------------------


def test_start_sink_creates_every_label_set_at_zero() -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "s1")
    ts = {"table": "db.t", "sink_id": "s1"}
    for name in (
        "icesink_rows_written_total",
        "icesink_dead_letter_rows_total",
        "icesink_bytes_written_total",
        "icesink_files_written_total",
        "icesink_replays_skipped_total",
        "icesink_commit_attempts_total",
        "icesink_commit_conflicts_total",
        "icesink_input_rows_total",
        "icesink_staged_bytes",
        "icesink_staged_files",
    ):
        assert _value(metrics, name, **ts) == 0, name
    for outcome in BATCH_OUTCOMES:
        assert _value(metrics, "icesink_batches_total", **ts, outcome=outcome) == 0
    for outcome in ("committed", "failed"):
        assert _value(metrics, "icesink_commits_total", **ts, outcome=outcome) == 0
    for kind in SCHEMA_CHANGE_KINDS:
        assert _value(metrics, "icesink_schema_changes_total", table="db.t", kind=kind) == 0
    for outcome in SCHEMA_CHECK_OUTCOMES:
        assert _value(metrics, "icesink_schema_checks_total", table="db.t", outcome=outcome) == 0
    for reason in DEAD_LETTER_REASONS:
        assert _value(metrics, "icesink_dead_letter_reasons_total", table="db.t", reason=reason) == 0
    for step in STEPS:
        assert _value(metrics, "icesink_step_duration_seconds_count", table="db.t", step=step) == 0
    assert _value(metrics, "icesink_schema_lock_wait_seconds_count", table="db.t") == 0
    assert _value(metrics, "icesink_orphan_files_total", table="db.t", action="deleted") == 0
    assert _value(metrics, "icesink_sink_start_timestamp_seconds", **ts) > 0  # type: ignore[operator]
    # No commit yet: no last-commit series (the alert falls back to the start time).
    assert _value(metrics, "icesink_last_commit_timestamp_seconds", **ts) is None


def test_start_sink_is_idempotent_and_binds_the_query() -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "s1", "query-1")
    started = _value(metrics, "icesink_sink_start_timestamp_seconds", table="db.t", sink_id="s1")
    metrics.rows_written.labels("db.t", "s1").inc(5)
    metrics.start_sink("db.t", "s1", "query-2")  # a restarted query, same sink id
    assert _value(metrics, "icesink_rows_written_total", table="db.t", sink_id="s1") == 5
    assert _value(metrics, "icesink_sink_start_timestamp_seconds", table="db.t", sink_id="s1") == started
    assert metrics.sink_of_query("query-1") == SinkIdentity("db.t", "s1")
    assert metrics.sink_of_query("query-2") == SinkIdentity("db.t", "s1")
    assert metrics.sink_of_query("other") is None


def test_label_values_match_the_code_that_feeds_them() -> None:
    from icesink.schema.coordinator import SchemaCheck
    from icesink.schema.diff import AddColumn, MakeOptional, WidenType
    from icesink.schema.primitives import BadRecordReason
    from icesink.schema.renames import RenameColumn
    from icesink.schema.source_ids import RecordSourceId

    assert set(DEAD_LETTER_REASONS) == {r.value for r in BadRecordReason}
    assert set(SCHEMA_CHECK_OUTCOMES) == {c.value for c in SchemaCheck}
    assert set(SCHEMA_CHANGE_KINDS) == {
        AddColumn.kind,
        WidenType.kind,
        MakeOptional.kind,
        RenameColumn.kind,
        RecordSourceId.kind,
    }


def test_record_files_keeps_the_longest_task_phases_of_the_batch() -> None:
    metrics = SinkMetrics(target_file_size_bytes=512 * MiB)
    # Two tasks' files: each phase's longest may come from a different task.
    files = [
        dataclasses.replace(_file(MiB), task_input_seconds=2.5, task_close_seconds=0.25),
        dataclasses.replace(_file(MiB), task_input_seconds=1.0, task_close_seconds=0.75),
    ]
    metrics.record_files("db.t", files)
    assert _value(metrics, "icesink_write_task_seconds_max", table="db.t", phase="input") == 2.5
    assert _value(metrics, "icesink_write_task_seconds_max", table="db.t", phase="close") == 0.75


def test_record_files_measures_sizes_against_the_effective_target() -> None:
    metrics = SinkMetrics(target_file_size_bytes=512 * MiB)
    files = [_file(MiB, writers=3, buffered=100), _file(4 * MiB, writers=7, buffered=50), _file(8 * MiB)]
    metrics.record_files("db.t", files, target_file_size_bytes=8 * MiB)
    assert _value(metrics, "icesink_target_file_size_bytes", table="db.t") == 8 * MiB
    assert _value(metrics, "icesink_data_file_size_ratio_sum", table="db.t") == pytest.approx(
        1 / 8 + 1 / 2 + 1
    )
    assert _value(metrics, "icesink_data_file_size_ratio_bucket", table="db.t", le="0.125") == 1
    assert _value(metrics, "icesink_data_file_size_ratio_bucket", table="db.t", le="0.5") == 2
    assert _value(metrics, "icesink_data_file_size_ratio_bucket", table="db.t", le="1.0") == 3
    assert _value(metrics, "icesink_data_file_size_bytes_sum", table="db.t") == 13 * MiB
    assert _value(metrics, "icesink_open_writers_max", table="db.t") == 7
    assert _value(metrics, "icesink_buffered_bytes_max", table="db.t") == 100
    # Without the effective target, the constructor's is assumed.
    metrics.record_files("db.u", [_file(256 * MiB)])
    assert _value(metrics, "icesink_data_file_size_ratio_sum", table="db.u") == 0.5


def test_record_commit_counts_what_was_committed() -> None:
    metrics = SinkMetrics()
    metrics.record_commit("db.t", "s", 7, [_file(100, rows=3), _file(200, rows=4)], attempts=3, conflicts=2)
    ts = {"table": "db.t", "sink_id": "s"}
    assert _value(metrics, "icesink_rows_written_total", **ts) == 7
    assert _value(metrics, "icesink_bytes_written_total", **ts) == 300
    assert _value(metrics, "icesink_files_written_total", **ts) == 2
    assert _value(metrics, "icesink_commits_total", **ts, outcome="committed") == 1
    assert _value(metrics, "icesink_commit_attempts_total", **ts) == 3
    assert _value(metrics, "icesink_commit_conflicts_total", **ts) == 2
    assert _value(metrics, "icesink_last_committed_batch_id", **ts) == 7
    assert _value(metrics, "icesink_last_commit_timestamp_seconds", **ts) > 0  # type: ignore[operator]
    metrics.record_staged("db.t", "s", [_file(50), _file(70)])
    assert _value(metrics, "icesink_staged_bytes", **ts) == 120
    assert _value(metrics, "icesink_staged_files", **ts) == 2


def test_time_step_logs_the_ids_of_the_batch(caplog: pytest.LogCaptureFixture) -> None:
    metrics = SinkMetrics()
    with (
        metrics.batch("db.t", "sink-a", 41, query_id="q", snapshot_id=1234),
        caplog.at_level(logging.INFO, logger="icesink.metrics"),
        metrics.time_step("db.t", "write"),
    ):
        pass
    (line,) = [r.getMessage() for r in caplog.records if "step write" in r.getMessage()]
    assert "batch 41" in line and "sink-a" in line and "db.t" in line and "snapshot 1234" in line
    assert _value(metrics, "icesink_step_duration_seconds_count", table="db.t", step="write") == 1


def test_a_step_after_the_batch_ended_names_no_batch(caplog: pytest.LogCaptureFixture) -> None:
    metrics = SinkMetrics()
    with metrics.batch("db.t", "sink-a", 41):
        pass
    with caplog.at_level(logging.INFO, logger="icesink.metrics"), metrics.time_step("db.t", "plan"):
        pass
    (line,) = [r.getMessage() for r in caplog.records if "step plan" in r.getMessage()]
    assert "batch 41" not in line and line.startswith("table db.t: step plan took")


# --- serving ---------------------------------------------------------------------------------


def test_merged_registries_sum_counters_and_histograms_and_take_the_largest_gauge() -> None:
    a, b = SinkMetrics(), SinkMetrics()
    for metrics, rows, writers in ((a, 10, 3), (b, 5, 9)):
        metrics.record_commit("db.t", "s", 1, [_file(100, rows=rows)], attempts=1, conflicts=0)
        metrics.record_files("db.t", [_file(100, writers=writers)], target_file_size_bytes=1000)
    b.record_commit("db.u", "s2", 4, [_file(1, rows=1)], attempts=1, conflicts=0)
    merged = MergedRegistries()
    merged.add(a.registry)
    merged.add(b.registry)
    merged.add(b.registry)  # idempotent
    served = CollectorRegistry(auto_describe=False)
    served.register(merged)
    text = generate_latest(served).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}  # the exposition parses
    assert served.get_sample_value("icesink_rows_written_total", {"table": "db.t", "sink_id": "s"}) == 15
    assert served.get_sample_value("icesink_rows_written_total", {"table": "db.u", "sink_id": "s2"}) == 1
    assert served.get_sample_value("icesink_open_writers_max", {"table": "db.t"}) == 9
    assert served.get_sample_value("icesink_data_file_size_ratio_count", {"table": "db.t"}) == 2
    assert families["icesink_rows_written"].type == "counter"
    assert text.count("# TYPE icesink_rows_written_total counter") == 1
    merged.remove(a.registry)
    assert served.get_sample_value("icesink_rows_written_total", {"table": "db.t", "sink_id": "s"}) == 5


def test_metrics_are_not_served_unless_configured(exports: None) -> None:
    metrics = SinkMetrics()
    assert metrics_server.export(metrics, MetricsConfig()) is None
    assert not metrics_server.is_exported(metrics)


def test_sinks_of_one_process_share_one_endpoint(exports: None, catalog_options: dict[str, str]) -> None:
    from icesink import IcebergSink

    options = {**catalog_options, "metrics.port": "0"}
    first = IcebergSink.from_options({**options, "table": "db.first"})
    second = IcebergSink.from_options({**options, "table": "db.second"})
    assert first.metrics_server is not None and first.metrics_server is second.metrics_server
    assert first.metrics_server.host == "127.0.0.1"
    first.metrics.start_sink("db.first", "a")
    second.metrics.start_sink("db.second", "b")
    second.metrics.rows_written.labels("db.second", "b").inc(3)
    with urllib.request.urlopen(first.metrics_server.url, timeout=5) as response:
        text = response.read().decode()
    assert 'icesink_rows_written_total{sink_id="a",table="db.first"} 0.0' in text
    assert 'icesink_rows_written_total{sink_id="b",table="db.second"} 3.0' in text
    assert "process_cpu_seconds_total" in text or "python_info" in text
    # Each sink still reads its own figures.
    assert (
        first.metrics.registry.get_sample_value(
            "icesink_rows_written_total", {"table": "db.second", "sink_id": "b"}
        )
        is None
    )


def test_a_port_in_use_fails_the_construction_with_the_fix(exports: None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError) as info:
            metrics_server.export(SinkMetrics(), MetricsConfig(port=port))
    text = str(info.value)
    assert "ICESINK-CONFIG" in text and f"127.0.0.1:{port}" in text and "metrics.port" in text


def test_a_failed_push_is_logged_and_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "s")
    pusher = PushgatewayPusher("http://127.0.0.1:1", "job", metrics.registry, interval_s=3600)
    with caplog.at_level(logging.WARNING, logger="icesink.metrics_server"):
        assert pusher.push() is False
        pusher.close()
        pusher.close()
    assert any("push of metrics to http://127.0.0.1:1" in r.getMessage() for r in caplog.records)


def test_metrics_options() -> None:
    config = SinkConfig.from_options(
        {
            "table": "db.t",
            "Metrics.Port": "9408",
            "metrics.host": "0.0.0.0",
            "metrics.pushgateway-url": "http://pushgateway:9091",
            "metrics.pushgateway-job": "orders",
        }
    )
    assert config.metrics == MetricsConfig(
        port=9408, host="0.0.0.0", pushgateway_url="http://pushgateway:9091", pushgateway_job="orders"
    )
    defaults = SinkConfig.from_options({"table": "db.t"}).metrics
    assert defaults.port is None and defaults.host == "127.0.0.1" and defaults.pushgateway_url is None
    with pytest.raises(ConfigError) as info:
        SinkConfig.from_options({"table": "db.t", "metrics.port": "99999"})
    assert "'metrics.port'" in str(info.value) and "99999" in str(info.value) and "0-65535" in str(info.value)
    with pytest.raises(ConfigError, match=r"metrics\.pushgateway-url"):
        SinkConfig.from_options({"table": "db.t", "metrics.pushgateway-url": "no url here"})


# --- progress --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ([('{"t":{"0":10,"1":5}}', '{"t":{"0":25,"1":5}}')], 15),
        ([('{"t":{"0":10}}', '{"t":{"0":25}}'), ('{"u":{"0":0}}', '{"u":{"0":3}}')], 18),
        ([('{"t":{"0":30}}', '{"t":{"0":25}}')], 0),  # a latest below the end (Tansu): never negative
        ([({"t": {"0": 1}}, {"t": {"0": 4}})], 3),  # already parsed
        ([('{"logOffset":3}', "None")], None),  # a file source: no Kafka offsets
        ([("None", "None")], None),
        ([], None),
    ],
)
def test_offsets_behind_latest(sources: list[tuple[Any, Any]], expected: int | None) -> None:
    assert offsets_behind_latest(sources) == expected


def _progress_event(query_id: str, rows: int, end: str, latest: str, batch_id: int = 0) -> Any:
    source = SimpleNamespace(endOffset=end, latestOffset=latest)
    progress = SimpleNamespace(
        id=query_id,
        batchId=batch_id,
        numInputRows=rows,
        inputRowsPerSecond=float("nan"),
        processedRowsPerSecond=250.0,
        batchDuration=1500,
        sources=[source],
    )
    return SimpleNamespace(progress=progress)


def test_progress_listener_records_the_queries_of_its_sinks() -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "sink-a", "q1")
    listener = ProgressMetrics(metrics)
    listener.on_progress(_progress_event("q1", 120, '{"t":{"0":120}}', '{"t":{"0":450}}'))
    listener.on_progress(_progress_event("unknown", 999, '{"t":{"0":1}}', '{"t":{"0":9}}'))
    ts = {"table": "db.t", "sink_id": "sink-a"}
    assert _value(metrics, "icesink_input_rows_total", **ts) == 120
    assert _value(metrics, "icesink_processed_rows_per_second", **ts) == 250
    assert _value(metrics, "icesink_input_rows_per_second", **ts) == 0  # NaN reported as 0
    assert _value(metrics, "icesink_batch_duration_seconds_sum", **ts) == 1.5
    assert _value(metrics, "icesink_source_offsets_behind_latest", **ts) == 330
    listener.on_terminated("q1")
    assert _value(metrics, "icesink_processed_rows_per_second", **ts) == 0
    listener.on_progress(SimpleNamespace())  # a malformed event is logged, never raised


def test_records_counted_by_the_batch_function_replace_the_rows_spark_counted() -> None:
    metrics = SinkMetrics()
    metrics.start_sink("db.t", "sink-a", "q1")
    listener = ProgressMetrics(metrics)
    for batch_id in range(KEPT_RECORD_COUNTS + 2):  # batches whose progress never came are forgotten
        metrics.count_source_records("q1", batch_id, 1000 + batch_id)
    assert metrics.source_records("q1", 0) is None and metrics.source_records("q1", 1) is None
    listener.on_progress(_progress_event("q1", 5, "{}", "{}", batch_id=3))  # 5 rows of 1,003 records
    listener.on_progress(_progress_event("q1", 5, "{}", "{}", batch_id=3))  # the count is used once
    ts = {"table": "db.t", "sink_id": "sink-a"}
    assert _value(metrics, "icesink_input_rows_total", **ts) == 1003 + 5
    assert _value(metrics, "icesink_processed_rows_per_second", **ts) == 250  # the last report's own
    listener.on_progress(_progress_event("q1", 5, "{}", "{}", batch_id=4))
    assert _value(metrics, "icesink_processed_rows_per_second", **ts) == 250 * 1004 / 5


def test_dashboard_builder_is_importable_without_side_effects(tmp_path: Path) -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "monitoring" / "build_dashboard.py"
    spec = importlib.util.spec_from_file_location("build_dashboard_unit", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([str(tmp_path / "board.json")]) == 0
    assert (tmp_path / "board.json").read_text() == module.to_json(module.build())
