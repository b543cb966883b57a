"""The long-stream upsert benchmark's pure parts: its windows and summary, the change mix, the plot."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks._upsert_changes import ChangeStream, Mix
from benchmarks._upsert_plot import plot
from benchmarks._upsert_reference import op_counts
from benchmarks._upsert_windows import summarize, summary_text, window_bounds, window_rate


def _run(rates: list[float], *, lookup: float | None = 1.0) -> dict[str, Any]:
    batches = [
        {
            "batch": n,
            "changes": 1000,
            "seconds": 1000 / rate,
            "changes_per_s": rate,
            "lookup_s": lookup,
            "commit_s": 0.5,
            "maintenance_s": 0.0,
            "delete_files_added": 16,
            "delete_files": 16 * n,
            "data_files": 16 + 16 * n,
        }
        for n, rate in enumerate(rates, start=1)
    ]
    scan = {"rows": 10, "data_files": 32, "delete_files": 16, "pyiceberg_s": 2.0, "duckdb_s": 3.0}
    compacted = {**scan, "pyiceberg_s": 1.0, "duckdb_s": 1.0}
    return {
        "label": "test",
        "config": {"keys": 10, "changes": 1000, "buckets": 16, "maintenance": "on", "master": "local[2]"},
        "machine": {"load_average_start": [1.0], "load_average_end": [2.0]},
        "batches": batches,
        "pyiceberg": [{"batch": 1, "changes_per_s": 1.0}, {"batch": 2, "changes_per_s": 10.0}],
        "scans": [{"batch": len(rates), "live": scan, "compacted": compacted}],
    }


def test_windows_are_batches_2_to_51_and_the_last_50_or_shorter_in_a_short_stream() -> None:
    assert window_bounds(300) == ((2, 51), (251, 300))
    assert window_bounds(60, 20) == ((2, 21), (41, 60))
    assert window_bounds(10) == ((2, 10), (2, 10))
    assert window_bounds(1) == ((1, 1), (1, 1))


def test_a_windows_rate_is_its_changes_over_its_seconds_not_a_median_of_rates() -> None:
    batches = [{"batch": 1, "changes": 100, "seconds": 50.0}] + [
        {"batch": n, "changes": 100, "seconds": s} for n, s in ((2, 1.0), (3, 3.0), (4, 4.0))
    ]
    assert window_rate(batches, (2, 3)) == 200 / 4.0
    assert window_rate(batches, (2, 4)) == 300 / 8.0
    assert window_rate(batches, (7, 9)) == 0.0


def test_the_summary_compares_the_last_window_with_the_first_and_pyiceberg_after_its_warm_up() -> None:
    run = _run([10.0] + [2000.0] * 50 + [1000.0] * 50, lookup=None)
    summary = summarize(run)
    assert (summary["first_window"], summary["last_window"]) == ((2, 51), (52, 101))
    assert (summary["first_changes_per_s"], summary["last_changes_per_s"]) == (2000.0, 1000.0)
    assert summary["last_to_first"] == 0.5
    assert summary["delete_files_per_partition"] == 101.0  # 16 a batch, never compacted
    assert summary["pyiceberg_ratio"] == 200.0  # batch 2 alone: batch 1 warms both up
    # the median batch: 1000 changes in 0.75 s (between 0.5 s and 1 s), against pyiceberg's 10/s
    assert summary["pyiceberg_ratio_to_median"] == pytest.approx(1000 / 0.75 / 10)
    assert summary["median_lookup_s"] is None
    text = summary_text(run)
    assert "last / first: 0.50 (goal >= 0.8: NOT met)" in text
    assert "| 101 | 10 | 32 / 16 | 2.00 | 1.00 | 2.00 | 3.00 | 1.00 | 3.00 |" in text


def test_a_batchs_mix_follows_the_shares_asked_for() -> None:
    stream = ChangeStream(5000, seed=11, mix=Mix(updates=0.5, inserts=0.3))
    batch = stream.batch(1, 1000)
    assert op_counts(batch) == {"u": 500, "c": 300, "d": 200}
    assert Counter(batch.column("_op").to_pylist()) == {"u": 500, "c": 300, "d": 200}
    assert stream.live == 5000 + 300 - 200


def test_the_plot_draws_runs_side_by_side_even_without_lookup_times(tmp_path: Path) -> None:
    path = plot([_run([100.0, 200.0]), _run([50.0, 60.0], lookup=None)], tmp_path / "p.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
