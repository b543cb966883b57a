"""The long-stream upsert benchmark's summary, from its per-batch records: windows, goals, scans.

Pure functions of the JSON :mod:`benchmarks.upsert_long` writes, so that a summary can be
printed again from an earlier run's file. A window's rate is its changes over its seconds
(the stream's own rate over those batches, not a median of per-batch rates); batch 1 warms
up (the JVM's JIT, Python workers) and is left out of the first window.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

WINDOW = 50  # batches per window: the first (2..51) against the last
GOAL_CHANGES_PER_S = 50_000  # on 2 cores
GOAL_LAST_TO_FIRST = 0.8  # the last window within 20% of the first
GOAL_DELETE_FILES_PER_PARTITION = 3  # "a small multiple" of the partitions
GOAL_PYICEBERG_RATIO = 100.0

Batch = dict[str, Any]


def window_bounds(last_batch: int, size: int = WINDOW) -> tuple[tuple[int, int], tuple[int, int]]:
    """The first window (from batch 2, ``size`` batches) and the last (the last ``size`` batches), inclusive.

    Shorter streams get shorter windows: both end inside ``1..last_batch``, and a stream of
    one batch has that batch as both.
    """
    if last_batch < 2:
        return (1, last_batch), (1, last_batch)
    first = (2, min(last_batch, 1 + size))
    last = (max(2, last_batch - size + 1), last_batch)
    return first, last


def window_rate(batches: Sequence[Batch], bounds: tuple[int, int]) -> float:
    """Changes per second over the batches numbered within ``bounds`` (inclusive): sum over time."""
    inside = [b for b in batches if bounds[0] <= b["batch"] <= bounds[1]]
    seconds = sum(b["seconds"] for b in inside)
    return sum(b["changes"] for b in inside) / seconds if seconds else 0.0


def _rate_of_median(batches: Sequence[Batch]) -> float:
    """Changes per second of the median batch (its changes over its median seconds)."""
    return statistics.median(b["changes"] for b in batches) / statistics.median(b["seconds"] for b in batches)


def _median(batches: Sequence[Batch], key: str) -> float | None:
    values = [b[key] for b in batches if b.get(key) is not None]
    return statistics.median(values) if values else None


def summarize(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of a run (the goals beside them), from its JSON."""
    batches: list[Batch] = result["batches"]
    last_batch = batches[-1]["batch"] if batches else 0
    size = int(result["config"].get("window") or WINDOW)
    first, last = window_bounds(last_batch, size)
    first_rate, last_rate = window_rate(batches, first), window_rate(batches, last)
    counted = [b for b in batches if b["batch"] >= first[0]]
    end = batches[-1] if batches else {}
    partitions = int(result["config"]["buckets"])
    reference = result.get("pyiceberg") or []
    same = {b["batch"]: b for b in batches}
    counted_reference = [r for r in reference if r["batch"] > 1] or reference  # batch 1 warms up
    ratios = [
        same[r["batch"]]["changes_per_s"] / r["changes_per_s"]
        for r in counted_reference
        if r["batch"] in same
    ]
    return {
        "first_window": first,
        "last_window": last,
        "first_changes_per_s": first_rate,
        "last_changes_per_s": last_rate,
        "last_to_first": last_rate / first_rate if first_rate else None,
        "median_batch_s": _median(counted, "seconds"),
        "median_lookup_s": _median(counted, "lookup_s"),
        "median_commit_s": _median(counted, "commit_s"),
        "median_maintenance_s": _median(counted, "maintenance_s"),
        "delete_files_added_per_batch": [b["delete_files_added"] for b in batches],
        "delete_files_at_end": end.get("delete_files", 0),
        "data_files_at_end": end.get("data_files", 0),
        "delete_files_per_partition": end.get("delete_files", 0) / partitions if partitions else None,
        "pyiceberg_ratio": statistics.median(ratios) if ratios else None,
        "pyiceberg_ratio_to_median": (
            _rate_of_median(counted) / statistics.median(r["changes_per_s"] for r in counted_reference)
            if counted_reference and counted
            else None
        ),
        "pyiceberg_batches": [r["batch"] for r in counted_reference],
    }


def _goal(met: bool) -> str:
    return "met" if met else "NOT met"


def summary_text(result: dict[str, Any]) -> str:
    """The printed summary of a run."""
    c, s, m = result["config"], summarize(result), result["machine"]
    batches = len(result["batches"])
    lines = [
        f"{result['label']}: {c['keys']:,} keys, bucket({c['buckets']}, id), {batches} batches "
        f"of {c['changes']:,} changes, maintenance {c['maintenance']}, {c['master']}; load average "
        f"{m['load_average_start'][0]} at the start, {m['load_average_end'][0]} at the end",
        f"changes/s, batches {s['first_window'][0]}-{s['first_window'][1]}: {s['first_changes_per_s']:,.0f}; "
        f"batches {s['last_window'][0]}-{s['last_window'][1]}: {s['last_changes_per_s']:,.0f}",
    ]
    if s["last_to_first"] is not None:
        lines.append(
            f"last / first: {s['last_to_first']:.2f} (goal >= {GOAL_LAST_TO_FIRST}: "
            f"{_goal(s['last_to_first'] >= GOAL_LAST_TO_FIRST)}); last >= {GOAL_CHANGES_PER_S:,}/s: "
            f"{_goal(s['last_changes_per_s'] >= GOAL_CHANGES_PER_S)}"
        )
    medians = {k: s[f"median_{k}"] for k in ("batch_s", "lookup_s", "commit_s", "maintenance_s")}
    lines.append(
        "per batch (median from batch 2): "
        + ", ".join(f"{k.removesuffix('_s')} {v:.2f} s" for k, v in medians.items() if v is not None)
    )
    added = s["delete_files_added_per_batch"]
    per_partition = s["delete_files_per_partition"]
    lines.append(
        f"delete files added per batch: min {min(added, default=0)}, max {max(added, default=0)}; "
        f"in the table at the end: {s['delete_files_at_end']} for {c['buckets']} partitions "
        f"({per_partition:.1f} per partition, goal <= {GOAL_DELETE_FILES_PER_PARTITION}: "
        f"{_goal(per_partition <= GOAL_DELETE_FILES_PER_PARTITION)}), {s['data_files_at_end']} data files"
    )
    if s["pyiceberg_ratio"] is not None:
        lines.append(
            f"x pyiceberg's upsert + delete on batches {s['pyiceberg_batches']}: {s['pyiceberg_ratio']:.1f}x "
            f"(goal {GOAL_PYICEBERG_RATIO:.0f}x: {_goal(s['pyiceberg_ratio'] >= GOAL_PYICEBERG_RATIO)}); "
            f"icesink's median batch from batch 2 against them: {s['pyiceberg_ratio_to_median']:.1f}x"
        )
    lines += scan_lines(result.get("scans") or [])
    return "\n".join(lines)


def scan_lines(scans: Sequence[dict[str, Any]]) -> list[str]:
    """The full scans as a Markdown table: the table as the stream left it against its rows compacted."""
    if not scans:
        return []
    lines = [
        "",
        "| after batch | rows | data / delete files | pyiceberg s | compacted | x "
        "| DuckDB s | compacted | x |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for scan in scans:
        live, fresh = scan["live"], scan["compacted"]
        cells = [f"{scan['batch']}", f"{live['rows']:,}", f"{live['data_files']} / {live['delete_files']}"]
        for reader in ("pyiceberg_s", "duckdb_s"):
            cells += [f"{live[reader]:.2f}", f"{fresh[reader]:.2f}", f"{live[reader] / fresh[reader]:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
