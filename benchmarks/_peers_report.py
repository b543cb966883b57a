"""The Markdown tables of :mod:`benchmarks.peers`."""

from __future__ import annotations

from typing import Any

from benchmarks._peers_summary import REFERENCE, goals, parse_contenders, summarize


def _number(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.0f}{unit}"


def _ratio(value: float | None, rounds: list[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.2f} ({', '.join(f'{r:.2f}' for r in rounds)})"


def _mib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**20:.2f}"


def _counts(values: list[int]) -> str:
    return "/".join(str(v) for v in sorted(set(values)))


def markdown(result: dict[str, Any]) -> str:
    """Per contender its medians and ratios to the Parquet sink; then icesink over Iceberg's sink."""
    c = result["config"]
    contenders = parse_contenders(",".join(c["contenders"]))
    runs = result["runs"]
    end = result.get("load_average_end", ["-"])[0]
    lines = [
        f"{c['batches']} micro-batches x {c['rows_per_batch']:,} rows, 64 partition values, local[2], "
        f"each run a fresh process, median of {len({r['round'] for r in runs})} of {c['rounds']} rounds; "
        "load average "
        f"{result['load_average_start'][0]} at the start, {end} at the end",
        "",
        "| contender | Spark | rows/s | x Parquet sink (rounds) | files | file size median / min (MiB) "
        "| DuckDB scan rows/s | x Parquet sink's files (rounds) | load at each run's start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summarize(runs, contenders):
        if not s["rounds"]:
            error = str(s["error"]).replace("|", "/")
            lines.append(f"| {s['contender']} | - | failed: {error} | | | | | | |")
            continue
        failed = f" ({s['failed']} failed)" if s["failed"] else ""
        ratio = "1.00" if s["writer"] == REFERENCE else _ratio(s["ratio"], s["ratios"])
        read = "1.00" if s["writer"] == REFERENCE else _ratio(s["read_ratio"], s["read_ratios"])
        lines.append(
            f"| {s['contender']}{failed} | {', '.join(s['spark'])} | {_number(s['median_rows_per_s'])} "
            f"| {ratio} | {_number(s['median_files'])} "
            f"| {_mib(s['median_file_bytes'])} / {_mib(s['min_file_bytes'])} "
            f"| {_number(s['median_read_rows_per_s'])} | {read} "
            f"| {', '.join(f'{x:.1f}' for x in s['load'])} |"
        )
    pairs = goals(runs, contenders)
    if pairs:
        lines += [
            "",
            "icesink's rows/s over Iceberg's sink's, same round (the goal: at least 2x, with no more files):",
            "",
            "| icesink | Iceberg's sink | x Iceberg's sink (rounds) | files, icesink / Iceberg's sink |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {p['icesink']} | {p['iceberg']} | {_ratio(p['ratio'], p['ratios'])} "
            f"| {_counts(p['files'])} / {_counts(p['peer_files'])} |"
            for p in pairs
        ]
    return "\n".join(lines)
