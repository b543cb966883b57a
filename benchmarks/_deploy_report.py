"""The summary and Markdown table of :mod:`benchmarks.deploy`, computed from its JSON (for ``--render``)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks._probes import percentile

REFERENCES = {"storage": "local", "cluster": "local[2]"}
"""Each part's contender the other is compared with, round by round."""


def _p50_p95(values: Sequence[float]) -> list[float] | None:
    return [round(percentile(values, 50), 4), round(percentile(values, 95), 4)] if values else None


def _median_by_key(batches: Sequence[dict[str, int]]) -> dict[str, float]:
    """Per key, the median over batches (a batch without the key counts 0)."""
    keys = sorted({k for b in batches for k in b})
    return {k: statistics.median(b.get(k, 0) for b in batches) for k in keys}


def _contender(name: str, runs: list[dict[str, Any]], reference: list[dict[str, Any]]) -> dict[str, Any]:
    by_round = {r["round"]: r for r in reference}
    ratios = [r["rows_per_s"] / by_round[r["round"]]["rows_per_s"] for r in runs if r["round"] in by_round]
    batches = [s for r in runs for s in r["batch_seconds"]]
    commits = [s for r in runs for s in r["commit_seconds"]]
    s3 = [b for r in runs for b in r["s3_requests"]]
    rest = [b for r in runs for b in r["rest_requests"]]
    summary: dict[str, Any] = {
        "contender": name,
        "median_rows_per_s": round(statistics.median(r["rows_per_s"] for r in runs)),
        "rows_per_s": [r["rows_per_s"] for r in runs],
        "ratio": round(statistics.median(ratios), 3) if ratios else None,
        "ratios": [round(x, 3) for x in ratios],
        "median_seconds": round(statistics.median(r["seconds"] for r in runs), 1),
        "batch_seconds_p50_p95": _p50_p95(batches),
        "commit_seconds_p50_p95": _p50_p95(commits),
        "files": runs[-1]["files"],
    }
    if s3:
        summary["s3_requests_per_batch"] = _requests_per_batch(s3, "by_bucket_and_type")
    if rest:
        summary["rest_requests_per_batch"] = _requests_per_batch(rest, "by_method")
    return summary


def _requests_per_batch(batches: list[dict[str, Any]], breakdown: str) -> dict[str, Any]:
    """Requests per batch (median, min, max) and the median of each kind, under ``breakdown``."""
    totals = [sum(b.values()) for b in batches]
    return {
        "median": statistics.median(totals),
        "min": min(totals),
        "max": max(totals),
        breakdown: _median_by_key(batches),
    }


def summarize(result: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Per part, per contender (the reference first): medians, ratios, percentiles, requests."""
    summary = {}
    for part, data in result["parts"].items():
        runs = data["runs"]
        names = list(dict.fromkeys(r["contender"] for r in runs))
        reference = REFERENCES[part]
        names.sort(key=lambda n: n != reference)
        mine = {n: [r for r in runs if r["contender"] == n] for n in names}
        summary[part] = [_contender(n, mine[n], mine.get(reference, [])) for n in names]
    return summary


def _ms(pair: Sequence[float] | None) -> str:
    return f"{pair[0] * 1000:,.0f} / {pair[1] * 1000:,.0f} ms" if pair else "-"


def _requests(figures: dict[str, Any] | None, key: str) -> str:
    if not figures:
        return "-"
    parts = ", ".join(f"{k} {v:g}" for k, v in figures[key].items())
    return f"{figures['median']:g} ({figures['min']}-{figures['max']}): {parts}"


def markdown(result: dict[str, Any]) -> str:
    """The tables of ``benchmarks/README.md``: one row per contender, both parts."""
    c, m = result["config"], result["machine"]
    lines = [
        f"{c['batches']} micro-batches x {c['rows_per_batch']:,} rows, {c['partition_by']}, "
        f"median of {c['rounds']} alternating rounds; load average (1 min) "
        f"{m['load_average_start'][0]} at the start, {m['load_average_end'][0]} at the end",
        "",
        "| part | contender | master | load avg (part start / end) | median rows/s | ratio "
        "| rows/s per round | foreachBatch p50 / p95 | commit p50 / p95 "
        "| S3 requests per batch: median (min-max): by bucket:type | REST requests per batch | data files |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for part, contenders in result["summary"].items():
        data = result["parts"][part]
        load = f"{data['load_average_start'][0]:.1f} / {data['load_average_end'][0]:.1f}"
        reference = REFERENCES[part]
        for s in contenders:
            master = next(r["master"] for r in data["runs"] if r["contender"] == s["contender"])
            ratio = "1" if s["contender"] == reference else f"{s['ratio']:.2f}x {reference}"
            per_round = ", ".join(f"{x:,}" for x in s["rows_per_s"])
            s3 = _requests(s.get("s3_requests_per_batch"), "by_bucket_and_type")
            rest = _requests(s.get("rest_requests_per_batch"), "by_method")
            lines.append(
                f"| {part} | {s['contender']} | {master.split(':')[0]} | {load} | {s['median_rows_per_s']:,} "
                f"| {ratio} | {per_round} | {_ms(s['batch_seconds_p50_p95'])} "
                f"| {_ms(s['commit_seconds_p50_p95'])} | {s3} | {rest} | {s['files'].get('count', '-')} |"
            )
    return "\n".join(lines)
