"""The Markdown tables of :mod:`benchmarks.run`: one run, the scaling matrix, the memory runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAIVE = "pyiceberg-naive"


def _mib(n: int | None, zero: str = "-") -> str:
    return f"{n / 2**20:,.0f} MiB" if n else zero


def _size(n: int) -> str:
    return f"{n / 2**20:.2f}" if n >= 2**20 / 100 else f"{n / 2**10:.1f} KiB"


def _ms(pair: Sequence[float] | None) -> str:
    return f"{pair[0] * 1000:,.0f} / {pair[1] * 1000:,.0f} ms" if pair else "-"


def markdown(result: dict[str, Any]) -> str:
    """The summary as the Markdown tables of ``benchmarks/README.md``."""
    c = result["config"]
    lines = [
        f"{c['batches']} micro-batches x {c['rows_per_batch']:,} rows, {c['partition_values']} partition "
        f"values ({c['partition_by']}), {c['master']}, "
        f"{c.get('row_groups_per_file', 1)} row group(s) per input file, "
        f"median of {c['repeats']} round-robin repeats; "
        f"load average {result['machine']['load_average_start'][0]} at the start, "
        f"{result['machine']['load_average_end'][0]} at the end",
        "",
        "| contender | median rows/s | x Parquet sink | rows per CPU s "
        "| driver peak RSS: Python (+ growth in the run) / JVM "
        "| largest worker peak RSS | files | file size min / median / max (MiB) "
        "| foreachBatch p50 / p99 | commit p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        files = s["files"]
        sizes = f"{_size(files['min'])} / {_size(files['median'])} / {_size(files['max'])}" if files else "-"
        ratio = f"{s['ratio_to_parquet']:.2f}" if s["ratio_to_parquet"] is not None else "-"
        per_cpu = f"{s['median_rows_per_cpu_s']:,}" if s["median_rows_per_cpu_s"] else "-"
        lines.append(
            f"| {s['contender']} | {s['median_rows_per_s']:,} | {ratio} | {per_cpu} "
            f"| {_mib(s['driver_peak_rss_bytes'])} (+{_mib(s['driver_growth_rss_bytes'], '0')}) "
            f"/ {_mib(s['jvm_peak_rss_bytes'])} "
            f"| {_mib(s['worker_peak_rss_bytes'])} | {files.get('count', '-') if files else '-'} | {sizes} "
            f"| {_ms(s.get('batch_seconds_p50_p99'))} | {_ms(s.get('commit_seconds_p50_p99'))} |"
        )
    split = [s for s in result["summary"] if "median_step_seconds" in s]
    if split:
        keys = list(split[0]["median_step_seconds"])
        lines += [
            "",
            "icesink, where the time goes (median seconds per run, share of the wall time):",
            "",
            "| contender | wall | " + " | ".join(k.replace("_", " ") for k in keys) + " |",
            "|---|---|" + "---|" * len(keys),
        ]
        for s in split:
            wall = s["median_seconds"]
            cells = [f"{v:.1f} s ({v / wall:.0%})" for v in s["median_step_seconds"].values()]
            lines.append(f"| {s['contender']} | {wall:.1f} s | " + " | ".join(cells) + " |")
    tasks = [s for s in split if "median_task_seconds" in s]
    if tasks:
        lines += [
            "",
            "icesink's write tasks (the longest task of each micro-batch, median over batches; "
            "`icesink_write_task_seconds_max`):",
            "",
            "| contender | input: receiving the rows | close: finishing the files after them |",
            "|---|---|---|",
        ]
        lines += [
            f"| {s['contender']} | {s['median_task_seconds']['input']:.2f} s "
            f"| {s['median_task_seconds']['close']:.2f} s |"
            for s in tasks
        ]
    return "\n".join(lines)


def scaling_markdown(scaling: dict[str, Any]) -> str:
    """One row per setting; per contender rows/s, x Parquet sink and microseconds per row."""
    settings = scaling["scaling"]
    names = settings[0]["config"]["contenders"]
    lines = [
        "| setting | batches x rows | partition values | master | load avg (start / end) | "
        + " | ".join(f"{n} rows/s (x Parquet, µs/row)" for n in names)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for s in settings:
        c, m = s["config"], s["machine"]
        cells = []
        for summary in s["summary"]:
            ratio = summary["ratio_to_parquet"]
            cells.append(
                f"{summary['median_rows_per_s']:,} ({ratio:.2f}x, {1e6 / summary['median_rows_per_s']:.1f})"
                if ratio is not None
                else f"{summary['median_rows_per_s']:,}"
            )
        lines.append(
            f"| {s['setting']} | {c['batches']} x {c['rows_per_batch']:,} | {c['partition_values']} "
            f"| {c['master']} | {m['load_average_start'][0]} / {m['load_average_end'][0]} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def memory_markdown(memory: dict[str, Any]) -> str:
    """One row per contender run alone: its driver's peaks, and their ratio to the naive sink's."""
    runs = [(r, r["summary"][0]) for r in memory["memory"]]
    naive = next((s for _, s in runs if s["contender"] == NAIVE), None)

    def ratio(s: dict[str, Any], *keys: str) -> str:
        if naive is None:
            return "-"
        return f"{sum(s[k] for k in keys) / sum(naive[k] for k in keys):.2f}"

    lines = [
        "| contender | load avg (start / end) | driver peak RSS: Python (+ growth in the run) "
        "| x naive | driver JVM peak RSS | x naive | Python + JVM, x naive |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, s in runs:
        m = r["machine"]
        lines.append(
            f"| {s['contender']} | {m['load_average_start'][0]} / {m['load_average_end'][0]} "
            f"| {_mib(s['driver_peak_rss_bytes'])} (+{_mib(s['driver_growth_rss_bytes'], '0')}) "
            f"| {ratio(s, 'driver_peak_rss_bytes')} | {_mib(s['jvm_peak_rss_bytes'])} "
            f"| {ratio(s, 'jvm_peak_rss_bytes')} "
            f"| {ratio(s, 'driver_peak_rss_bytes', 'jvm_peak_rss_bytes')} |"
        )
    return "\n".join(lines)
