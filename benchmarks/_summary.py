"""The summary of :mod:`benchmarks.run`'s runs, per contender, from the runs as written to JSON.

Its ratios are to :data:`REFERENCE`, the Parquet sink's run of the same repeat.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks._probes import percentile
from icesink.metric_families import STEPS

REFERENCE = "parquet"


def summarize(runs: list[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per contender, from the runs as written to JSON (so that ``--render`` recomputes it)."""
    repeats: dict[int, dict[str, dict[str, Any]]] = {}
    for run in runs:
        repeats.setdefault(run["repeat"], {})[run["contender"]] = run
    return [_summarize(name, list(repeats.values())) for name in names]


def _summarize(name: str, repeats: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    mine = [r[name] for r in repeats]
    ratios = [r[name]["rows_per_s"] / r[REFERENCE]["rows_per_s"] for r in repeats if REFERENCE in r]
    # A negative figure is a worker that ended during the run, counted by a probe that
    # did not yet keep its last sample: such a run's CPU time is not known.
    cpu = [r["rows"] / sum(r["cpu_seconds"].values()) for r in mine if min(r["cpu_seconds"].values()) >= 0]
    batches = [s for r in mine for s in r["batch_seconds"]]
    commits = [s for r in mine for s in r["commit_seconds"]]
    memory = [r["memory"] for r in mine]
    summary: dict[str, Any] = {
        "contender": name,
        "median_rows_per_s": round(statistics.median(r["rows_per_s"] for r in mine)),
        "rows_per_s": [r["rows_per_s"] for r in mine],
        "ratio_to_parquet": round(statistics.median(ratios), 3) if ratios else None,
        "ratios_to_parquet": [round(x, 3) for x in ratios],
        "median_rows_per_cpu_s": round(statistics.median(cpu)) if cpu else None,
        "median_cpu_seconds": {
            k: round(statistics.median(r["cpu_seconds"][k] for r in mine), 1) for k in mine[0]["cpu_seconds"]
        },
        "median_worker_system_seconds": round(
            statistics.median(r.get("worker_system_seconds", 0.0) for r in mine), 1
        ),
        # Peaks carry what earlier runs left in a process (the driver keeps the naive
        # sink's Arrow memory, the JVM its heap): the growth during the run says what
        # this contender added.
        "driver_peak_rss_bytes": max(m["driver_peak_rss_bytes"] for m in memory),
        "driver_growth_rss_bytes": max(
            m["driver_peak_rss_bytes"] - m["driver_start_rss_bytes"] for m in memory
        ),
        "jvm_peak_rss_bytes": max(m["jvm_peak_rss_bytes"] for m in memory),
        "worker_peak_rss_bytes": max(m["worker_peak_rss_bytes"] for m in memory),
        "files": mine[-1]["files"],
    }
    if batches:
        summary["batch_seconds_p50_p99"] = [
            round(percentile(batches, 50), 3),
            round(percentile(batches, 99), 3),
        ]
    if commits:
        summary["commit_seconds_p50_p99"] = [
            round(percentile(commits, 50), 3),
            round(percentile(commits, 99), 3),
        ]
    if mine[0]["step_seconds"]:
        summary.update(_step_summary(mine))
    return summary


def _step_summary(mine: list[dict[str, Any]]) -> dict[str, Any]:
    """icesink's steps, from its metrics: the median time of each, and of the write tasks' phases."""
    steps = {s: statistics.median(r["step_seconds"][s] for r in mine) for s in STEPS}
    # Inside foreachBatch but in no timed step (replay check, table load, staging,
    # dead letters); outside foreachBatch: Spark's own work per trigger (planning,
    # listing the source, offset and commit logs).
    steps["rest_of_foreach_batch"] = statistics.median(
        sum(r["batch_seconds"]) - sum(r["step_seconds"].values()) for r in mine
    )
    steps["outside_foreach_batch"] = statistics.median(r["seconds"] - sum(r["batch_seconds"]) for r in mine)
    summary: dict[str, Any] = {"median_step_seconds": {k: round(v, 2) for k, v in steps.items()}}
    phases = [t for r in mine for t in r.get("task_seconds", [])]
    if phases:  # the longest write task's, per batch
        summary["median_task_seconds"] = {
            p: round(statistics.median(t[p] for t in phases), 2) for p in phases[0]
        }
    summary["median_seconds"] = round(statistics.median(r["seconds"] for r in mine), 2)
    return summary
