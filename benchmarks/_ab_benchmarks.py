"""The benchmarks :mod:`benchmarks.compare_commits` can run: each one's command line and figures.

A :class:`Benchmark` says which module runs, the arguments the A/B sets itself (where the
result goes, the order of the contenders of a round), and how to read the figures of one run
from what it left: its ``--out`` JSON file or, for a benchmark without one, the JSON line it
prints last. A figure is a name (with its unit) and a number; the A/B compares each figure of
the two commits round by round.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._upsert_report import summarize as upsert_summary

Figures = dict[str, float]


@dataclass(frozen=True)
class Benchmark:
    """One benchmark the A/B runs.

    Attributes:
        module: The module run with ``python -m`` (from the commit's own checkout).
        contenders: Its default contenders, in order (empty: it has none to rotate).
        arguments: The arguments the A/B sets, given the round's contenders (comma-separated,
            empty when the benchmark has none), the run's JSON result file and the A/B's folder.
        figures: The figures of one run, given its result file and what it printed.
    """

    module: str
    contenders: tuple[str, ...]
    arguments: Callable[[str, Path, Path], list[str]]
    figures: Callable[[Path, str], Figures]


def run_figures(out: Path, printed: str) -> Figures:
    """``benchmarks.run``: each contender's rows/s and its ratio to the Parquet sink's run."""
    figures: Figures = {}
    for summary in json.loads(out.read_text())["summary"]:
        name = summary["contender"]
        figures[f"{name} rows/s"] = float(summary["median_rows_per_s"])
        if summary.get("ratio_to_parquet") is not None and name != "parquet":
            figures[f"{name} x parquet"] = float(summary["ratio_to_parquet"])
    return figures


def routing_figures(out: Path, printed: str) -> Figures:
    """``benchmarks.routing_tables`` (its JSON is the last line it prints): rates, CPU seconds, ratios."""
    result = last_json_line(printed)
    figures: Figures = {}
    for kind, rate in result["median_messages_per_s"].items():
        runs = [r for r in result["runs"] if r["kind"] == kind]
        figures[f"{kind} msg/s"] = float(rate)
        figures[f"{kind} msg per CPU s"] = statistics.median([r["messages"] / r["cpu_seconds"] for r in runs])
        later = [r["after_first_rate"] for r in runs if r.get("after_first_rate")]
        if later:  # the micro-batches after the first, which creates the tables
            figures[f"{kind} msg/s after batch 1"] = statistics.median(later)
        if kind in result["ratios"]:
            figures[f"{kind} / single"] = statistics.median(result["ratios"][kind])
        if kind in result.get("ratios_after_first_batch", {}):
            figures[f"{kind} / single after batch 1"] = statistics.median(
                result["ratios_after_first_batch"][kind]
            )
    return figures


def upsert_figures(out: Path, printed: str) -> Figures:
    """``benchmarks.upsert``: icesink's changes/s and the medians of a batch's steps, compaction."""
    result = json.loads(out.read_text())
    summary = upsert_summary(result)
    figures: Figures = {"icesink changes/s": float(summary["icesink_changes_per_s"])}
    for step, seconds in summary["seconds_split"].items():
        figures[f"{step.removesuffix('_s').replace('_', ' ')} s"] = float(seconds)
    figures["compaction s"] = float(result["reads"]["compaction"]["seconds"])
    return figures


def last_json_line(printed: str) -> dict[str, Any]:
    """The last line of ``printed`` that is a JSON object."""
    for line in reversed(printed.splitlines()):
        if line.startswith("{"):
            value: dict[str, Any] = json.loads(line)
            return value
    raise SystemExit("the benchmark printed no JSON line: see its output in the A/B's folder")


def _run_arguments(contenders: str, out: Path, workdir: Path) -> list[str]:
    # One repeat per process: the rounds of the A/B are the repeats.
    return [
        "--contenders",
        contenders,
        "--repeats",
        "1",
        "--workdir",
        str(workdir / "inputs"),
        "--out",
        str(out),
    ]


def _routing_arguments(contenders: str, out: Path, workdir: Path) -> list[str]:
    return ["--contenders", contenders]


def _upsert_arguments(contenders: str, out: Path, workdir: Path) -> list[str]:
    # pyiceberg's batches measure pyiceberg, not the commit: none unless asked for.
    return ["--pyiceberg-batches", "0", "--workdir", str(workdir / "upsert"), "--out", str(out)]


BENCHMARKS = {
    "run": Benchmark(
        "benchmarks.run", ("icesink-bucket", "icesink-none", "parquet"), _run_arguments, run_figures
    ),
    "routing": Benchmark(
        "benchmarks.routing_tables", ("single", "routed"), _routing_arguments, routing_figures
    ),
    "upsert": Benchmark("benchmarks.upsert", (), _upsert_arguments, upsert_figures),
}
