"""The long-stream upsert benchmark's plot, drawn with matplotlib from runs' JSON results.

Four panels over the batches, one colour per run, so that runs of different code or
settings lie side by side: changes per second (and the machine's 1-minute load average);
lookup and commit seconds; the full scans' seconds (pyiceberg and DuckDB, the table as the
stream left it and its rows freshly compacted); the live delete files and data files in the
table.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt


def _series(batches: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    points = [(b["batch"], b[key]) for b in batches if b.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def plot(runs: Sequence[dict[str, Any]], path: Path) -> Path:
    """Draw ``runs`` (each a result as :mod:`benchmarks.upsert_long` writes it) into the PNG ``path``."""
    figure, axes = plt.subplots(2, 2, figsize=(14, 9), sharex=True)
    rate, steps, scans, files = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    load = rate.twinx()  # a shared machine's load explains much of a batch's time
    for n, run in enumerate(runs):
        colour, label, batches = colours[n % len(colours)], run["label"], run["batches"]
        rate.plot(*_series(batches, "changes_per_s"), color=colour, label=label)
        load.plot(*_series(batches, "load_average"), color=colour, linewidth=0.6, linestyle=":")
        steps.plot(*_series(batches, "lookup_s"), color=colour, label=f"{label}: lookup")
        steps.plot(*_series(batches, "commit_s"), color=colour, linestyle="--", label=f"{label}: commit")
        files.plot(*_series(batches, "delete_files"), color=colour, label=f"{label}: delete files")
        files.plot(
            *_series(batches, "data_files"), color=colour, linestyle="--", label=f"{label}: data files"
        )
        at = [s["batch"] for s in run.get("scans") or []]
        for reader, marker in (("pyiceberg_s", "o"), ("duckdb_s", "s")):
            name = reader.removesuffix("_s")
            live = [s["live"][reader] for s in run.get("scans") or []]
            fresh = [s["compacted"][reader] for s in run.get("scans") or []]
            scans.plot(at, live, color=colour, marker=marker, label=f"{label}: {name}")
            scans.plot(
                at, fresh, color=colour, marker=marker, linestyle=":", label=f"{label}: {name}, compacted"
            )
    rate.set_title("changes per second, per batch; the machine's load average (dotted, right)")
    rate.set_ylim(bottom=0)
    load.set_ylim(bottom=0)
    steps.set_title("seconds per batch: lookup (solid), commit (dashed)")
    scans.set_title("full scan seconds: the stream's table (solid), its rows compacted (dotted)")
    files.set_title("live files in the table: delete (solid), data (dashed)")
    for ax in (rate, steps, scans, files):
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="x-small")
    for ax in (scans, files):
        ax.set_xlabel("batch")
    first = runs[0]["config"] if runs else {}
    figure.suptitle(
        f"Upserts over a long stream: {first.get('keys', 0):,} keys, bucket({first.get('buckets')}, id), "
        f"{first.get('changes', 0):,} changes a batch"
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
