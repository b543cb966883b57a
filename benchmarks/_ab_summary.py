"""The summary of :mod:`benchmarks.compare_commits`: per figure, each commit's median and B/A per round.

The ratio is taken round by round (B's run over A's run of the same round, two processes
started one after the other), then its median over the rounds: a machine whose load drifts
moves both runs of a round alike, so the per-round ratios spread less than the figures do.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks._ab_benchmarks import Figures


@dataclass(frozen=True)
class Run:
    """One run of the benchmark: a fresh process of one commit's checkout.

    Attributes:
        commit: The commit run.
        round: Its round, from 1.
        position: 1 when it ran first in its round, 2 second.
        figures: What the benchmark measured.
        load_average: The machine's 1-minute load average when the process started.
        seconds: The process's wall-clock time, from start to exit.
        sink_file: The file of the ``sink`` package the process imported (proof of whose code ran).
    """

    commit: str
    round: int
    position: int
    figures: Figures
    load_average: float
    seconds: float
    sink_file: str


@dataclass(frozen=True)
class FigureRow:
    """One figure over the rounds: A's and B's values, and B/A per round where both have it."""

    name: str
    base: list[float]
    head: list[float]
    ratios: list[float]

    def as_dict(self) -> dict[str, Any]:
        """The row with its medians, as written to JSON."""
        return {
            "figure": self.name,
            "median_base": _median(self.base),
            "median_head": _median(self.head),
            "median_ratio": _median(self.ratios),
            "base": self.base,
            "head": self.head,
            "ratios": self.ratios,
        }


def figure_rows(base: str, head: str, runs: list[Run]) -> list[FigureRow]:
    """Every figure the runs report, in the order the first run of ``base`` gives them."""
    names: list[str] = []
    for run in sorted(runs, key=lambda r: (r.commit != base, r.round)):
        names += [n for n in run.figures if n not in names]
    rounds = sorted({r.round for r in runs})
    by_key = {(r.commit, r.round): r.figures for r in runs}
    rows = []
    for name in names:
        pairs = [(by_key.get((base, n), {}).get(name), by_key.get((head, n), {}).get(name)) for n in rounds]
        rows.append(
            FigureRow(
                name,
                [a for a, _ in pairs if a is not None],
                [b for _, b in pairs if b is not None],
                [b / a for a, b in pairs if a and b is not None],
            )
        )
    return rows


def markdown(base: str, head: str, runs: list[Run]) -> str:
    """The figures' table, then one line per run (order, load, time, whose ``sink``)."""
    lines = [
        f"A = {base[:7]}, B = {head[:7]}; {len({r.round for r in runs})} round(s)",
        "",
        "| figure | A median | B median | B/A (median of rounds) | B/A per round "
        "| A per round | B per round |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in figure_rows(base, head, runs):
        lines.append(
            f"| {row.name} | {_number(_median(row.base))} | {_number(_median(row.head))} "
            f"| {_ratio(_median(row.ratios))} | {', '.join(_ratio(x) for x in row.ratios)} "
            f"| {', '.join(_number(x) for x in row.base)} | {', '.join(_number(x) for x in row.head)} |"
        )
    lines += [
        "",
        "| round | position | commit | load at start | seconds | sink |",
        "|---|---|---|---|---|---|",
    ]
    for run in sorted(runs, key=lambda r: (r.round, r.position)):
        which = "A" if run.commit == base else "B"
        lines.append(
            f"| {run.round} | {run.position} | {which} {run.commit[:7]} | {run.load_average:.1f} "
            f"| {run.seconds:.0f} | {run.sink_file} |"
        )
    return "\n".join(lines)


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
