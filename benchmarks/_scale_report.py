"""The tables of :mod:`benchmarks.scale`: measured points per axis, and the slopes fitted through them.

A slope is the least-squares line through an axis's points (the median batch of each),
in milliseconds per unit of the varied parameter (:data:`UNITS`). The per-file commit slope
is fitted through every point of the ``rows`` and ``partitions`` axes against the data
files their batches committed (one table, so one commit per batch). The ``executors``
axis is not fitted: it is reported as ratios to its first point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Per axis: the point's parameter, the unit of its slope (in the parameter's own count).
UNITS: dict[str, tuple[str, int, str]] = {
    "rows": ("rows", 100_000, "100k rows"),
    "partitions": ("partition_values", 1_000, "1k partition values"),
    "tables": ("tables", 1, "table"),
    "tasks": ("input_tasks", 1, "input task"),
    "snapshots": ("snapshots", 1_000, "1k snapshots kept"),
}
#: Measures fitted, as (key in a point's medians, what the tables call it).
MEASURES = (
    ("wall_s", "batch wall"),
    ("step_commit", "commit"),
    ("planning_s", "planning (driver, outside jobs and commit)"),
    ("job_span_s", "Spark jobs running"),
    ("task_s", "task time (summed)"),
    ("driver_cpu_s", "Python driver CPU"),
)
_FILE_AXES = ("rows", "partitions")


def slope(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """The least-squares slope of ``ys`` over ``xs`` (``None`` for fewer than two distinct x)."""
    if len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def fits(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fitted axis (and per data file of a commit), each measure's slope in ms per unit."""
    result = []
    for axis, (parameter, per, unit) in UNITS.items():
        mine = [p for p in points if p["point"]["axis"] == axis]
        xs = [p["point"][parameter] / per for p in mine]
        row = {"axis": axis, "unit": unit, "points": len(mine)}
        for key, _ in MEASURES:
            s = slope(xs, [p["median"].get(key, 0.0) for p in mine])
            row[key] = None if s is None else round(s * 1000, 1)
        result.append(row)
    with_files = [p for p in points if p["point"]["axis"] in _FILE_AXES]
    files = [p["median"]["files"] for p in with_files]
    per_file = slope(files, [p["median"].get("step_commit", 0.0) for p in with_files])
    result.append(
        {
            "axis": "files per commit",
            "unit": "data file",
            "points": len(with_files),
            "step_commit": None if per_file is None else round(per_file * 1000, 2),
        }
    )
    return result


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f}"


def points_markdown(points: list[dict[str, Any]]) -> str:
    """One row per point: medians of its measured batches."""
    lines = [
        "| axis | value | batch wall ms | driver outside jobs ms: commit / planning | Spark jobs running ms "
        "| task time ms (summed) | jobs / tasks | data files "
        "| CPU ms: Python driver / driver JVM (local: executors in it) | load (start / end) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        m, load = p["median"], p["load_average"]
        lines.append(
            f"| {p['point']['axis']} | {p['point']['label']} | {_ms(m['wall_s'])} "
            f"| {_ms(m['outside_jobs_s'])}: {_ms(m.get('step_commit', 0.0))} / {_ms(m['planning_s'])} "
            f"| {_ms(m['job_span_s'])} | {_ms(m['task_s'])} | {m['jobs']:.0f} / {m['tasks']:.0f} "
            f"| {m['files']:,.0f} | {_ms(m['driver_cpu_s'])} / {_ms(m['driver_jvm_cpu_s'])} "
            f"| {load[0]} / {load[1]} |"
        )
    return "\n".join(lines)


def fits_markdown(rows: list[dict[str, Any]]) -> str:
    """The slopes, ms per unit (``-``: the axis was not run, or has one point)."""
    lines = [
        "| axis | ms per | points | " + " | ".join(name for _, name in MEASURES) + " |",
        "|---|---|---|" + "---|" * len(MEASURES),
    ]
    for r in rows:
        cells = [_signed(r.get(key)) for key, _ in MEASURES]
        lines.append(f"| {r['axis']} | {r['unit']} | {r['points']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+,}"


def executors_markdown(points: list[dict[str, Any]]) -> str:
    """The executors axis: each measure as a ratio to the axis's first point (same run)."""
    mine = [p for p in points if p["point"]["axis"] == "executors"]
    if len(mine) < 2:
        return ""
    first = mine[0]
    keys = ("wall_s", "job_span_s", "task_s", "outside_jobs_s")
    names = ("batch wall", "Spark jobs running", "task time (summed)", "driver outside jobs")
    lines = [
        "| executors | " + " | ".join(f"{n} (x {first['point']['label']})" for n in names) + " |",
        "|---|" + "---|" * len(keys),
    ]
    for p in mine:
        cells = [f"{p['median'][k] / first['median'][k]:.2f}x" if first["median"][k] else "-" for k in keys]
        lines.append(f"| {p['point']['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """Every table of a run."""
    points = result["points"]
    parts = [points_markdown(points), fits_markdown(fits(points)), executors_markdown(points)]
    return "\n\n".join(p for p in parts if p)
