"""The Kafka job against Kafka Connect benchmark: run windows, summary, the Iceberg sink's settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks._commit_windows import Commit, messages_for_ratio, run_figures
from benchmarks._kafka_connect import IcebergSinkSettings
from benchmarks._kafka_connect_report import CONNECT, ICESINK, summarize
from benchmarks._process_cpu import TreeCpuSampler


def _run(contender: str, round_no: int, per_s: float, per_cpu_s: float) -> dict[str, Any]:
    figures = {"messages_per_s": per_s, "messages_per_cpu_s": per_cpu_s}
    return {"contender": contender, "round": round_no, **figures}


def _sampled(samples: list[tuple[float, float]]) -> TreeCpuSampler:
    sampler = TreeCpuSampler(pid=0)
    sampler.samples = samples
    return sampler


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
    assert summary[ICESINK]["median_messages_per_s"] == 150
    assert summary[ICESINK]["median_messages_per_cpu_s"] == 90
    assert summary[CONNECT]["median_messages_per_s"] == 100
    assert summary[CONNECT]["median_messages_per_cpu_s"] == 30
    assert summary["ratio_messages_per_s"] == {"median": 1.5, "rounds": [3.0, 0.5, 1.5]}
    assert summary["ratio_messages_per_cpu_s"] == {"median": 3.0, "rounds": [2.0, 4.0, 3.0]}
    assert "ratio_steady_messages_per_cpu_s" not in summary  # no run had a steady state
    assert summary["messages_for_goal"] is None


def test_the_steady_state_runs_from_the_first_commit_to_the_one_holding_the_last_message() -> None:
    # Launched at 100 s; 20 CPU s spent by the first commit at 110 s (1,000 rows), then 1 CPU s
    # per 1,000 rows up to 10,000 rows at 119 s; a maintenance snapshot after that adds no row.
    commits = [Commit(110.0, 1_000), Commit(115.0, 6_000), Commit(119.0, 10_000)]
    cpu = _sampled([(100.0, 0.0), (110.0, 20.0), (120.0, 30.0)])
    figures = run_figures(commits, 10_000, launched=100.0, cpu=cpu)
    assert figures["seconds"] == pytest.approx(19.0)
    assert figures["cpu_seconds"] == pytest.approx(29.0)
    assert figures["commits"] == 3
    assert figures["steady_messages"] == 9_000
    assert figures["steady_cpu_seconds"] == pytest.approx(9.0)
    assert figures["steady_messages_per_cpu_s"] == pytest.approx(1_000.0)
    assert figures["steady_messages_per_s"] == pytest.approx(1_000.0)
    assert figures["startup_cpu_seconds"] == pytest.approx(19.0)  # 29 less 10,000 at 1 ms each


def test_a_run_committed_at_once_has_no_steady_state() -> None:
    figures = run_figures(
        [Commit(110.0, 500)], 500, launched=100.0, cpu=_sampled([(100.0, 1.0), (120.0, 21.0)])
    )
    assert figures["cpu_seconds"] == pytest.approx(11.0)
    assert figures["steady_messages_per_cpu_s"] is None
    assert figures["startup_cpu_seconds"] is None


def test_the_message_count_for_a_ratio_follows_from_start_up_and_per_message_costs() -> None:
    # job: 20 CPU s to start, 10 us a message; Connect: 10 s, 30 us: 2x at 30 / 10 us = 3,000,000
    assert messages_for_ratio(2.0, (20.0, 10e-6), (10.0, 30e-6)) == pytest.approx(3_000_000)
    assert messages_for_ratio(2.0, (20.0, 10e-6), (10.0, 15e-6)) is None  # 1.5x at best
    assert messages_for_ratio(2.0, (5.0, 10e-6), (10.0, 30e-6)) == 0.0  # from the first message


def test_the_sampler_reads_the_cpu_of_a_process_and_its_children() -> None:
    burn = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass"
    parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {burn!r}])"
    process = subprocess.Popen([sys.executable, "-c", parent])
    sampler = TreeCpuSampler(process.pid, interval_s=0.05).start()
    process.wait()
    sampler.stop()
    spent = max(cpu for _, cpu in sampler.samples)
    assert spent >= 0.6  # the child's burn, seen while it ran
    cpus = [cpu for _, cpu in sampler.samples]
    assert cpus == sorted(cpus)
    middle = (sampler.samples[0][0] + sampler.samples[-1][0]) / 2
    assert cpus[0] <= sampler.at(middle) <= cpus[-1]


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
