"""The figures of ``benchmarks/kafka_connect.py``: one line per run, the medians, the same-run ratios.

Every figure comes twice: over the whole run of a new process, and in the steady state
between its first commit and the one holding its last message
(:mod:`benchmarks._commit_windows`). The ratios are icesink / Connect within each round,
their median reported; the message count at which a whole run would reach 2x Connect per
CPU second comes from the medians of the start-up CPU and of the CPU per message.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks._commit_windows import messages_for_ratio

ICESINK, CONNECT = "icesink", "connect"
RATIOS = ("messages_per_s", "messages_per_cpu_s", "steady_messages_per_s", "steady_messages_per_cpu_s")
GOAL = 2.0  # icesink's messages per CPU second against Connect's


def run_line(result: dict[str, Any]) -> str:
    """One run's figures on one line."""
    line = (
        f"round {result['round']} ({result['contender']}): {result['seconds']:.1f} s = "
        f"{result['messages_per_s']:,.0f} messages/s; {result['cpu_seconds']:.1f} CPU s = "
        f"{result['messages_per_cpu_s']:,.0f} messages per CPU second; {result['data_files']} files "
        f"({result['data_bytes'] / result['rows']:,.0f} bytes a row) in "
        f"{result['commits']} commits (first at {result['first_commit_seconds']:.1f} s, "
        f"{result['first_commit_cpu_seconds']:.1f} CPU s, {result['first_commit_rows']:,} rows)"
    )
    if result["steady_messages_per_cpu_s"] is not None:
        line += (
            f"; steady {result['steady_messages']:,} messages in {result['steady_seconds']:.1f} s, "
            f"{result['steady_cpu_seconds']:.1f} CPU s = {result['steady_messages_per_s']:,.0f} messages/s, "
            f"{result['steady_messages_per_cpu_s']:,.0f} per CPU second; start-up "
            f"{result['startup_cpu_seconds']:.1f} CPU s"
        )
    return line + (
        f"; files by {result['file_format']['created_by']}, {'/'.join(result['file_format']['codecs'])}"
        f" (broker {result['broker_cpu_seconds']:.1f} CPU s; load average {result['load_average']:.1f})"
    )


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each contender's medians, the medians of the rounds' icesink / Connect ratios, and where 2x lies."""
    summary: dict[str, Any] = {}
    for contender in (ICESINK, CONNECT):
        mine = [r for r in results if r["contender"] == contender]
        figures = {f"median_{key}": _median([r.get(key) for r in mine]) for key in RATIOS}
        figures["median_startup_cpu_seconds"] = _median([r.get("startup_cpu_seconds") for r in mine])
        steady = figures["median_steady_messages_per_cpu_s"]
        figures["median_steady_cpu_us_per_message"] = 1e6 / steady if steady else None
        summary[contender] = {k: round(v, 1) if v is not None else None for k, v in figures.items()}
    for key in RATIOS:
        values = []
        for number in sorted({r["round"] for r in results}):
            pair = {r["contender"]: r for r in results if r["round"] == number}
            job, connect = pair[ICESINK].get(key), pair[CONNECT].get(key)
            if job is not None and connect is not None:
                values.append(job / connect)
        if values:
            summary[f"ratio_{key}"] = {
                "median": round(statistics.median(values), 2),
                "rounds": [round(v, 2) for v in values],
            }
    summary["messages_for_goal"] = _messages_for_goal(summary)
    return summary


def _messages_for_goal(summary: dict[str, Any]) -> float | None:
    """The whole run's message count at which the job reaches :data:`GOAL` x Connect per CPU second."""
    costs = []
    for contender in (ICESINK, CONNECT):
        start = summary[contender]["median_startup_cpu_seconds"]
        per_message_us = summary[contender]["median_steady_cpu_us_per_message"]
        if start is None or per_message_us is None:
            return None
        costs.append((start, per_message_us / 1e6))
    messages = messages_for_ratio(GOAL, costs[0], costs[1])
    return round(messages) if messages is not None else None


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary, for people."""
    lines = []
    for contender in (ICESINK, CONNECT):
        f = summary[contender]
        lines.append(
            f"median ({contender}): whole run {f['median_messages_per_s']:,} messages/s, "
            f"{f['median_messages_per_cpu_s']:,} per CPU second; steady {f['median_steady_messages_per_s']} "
            f"messages/s, {f['median_steady_messages_per_cpu_s']} per CPU second "
            f"({f['median_steady_cpu_us_per_message']} CPU us a message); start-up "
            f"{f['median_startup_cpu_seconds']} CPU s"
        )
    for key in RATIOS:
        ratio = summary.get(f"ratio_{key}")
        if ratio is not None:
            lines.append(f"icesink / Connect, {key}: {ratio['median']} (rounds {ratio['rounds']})")
    goal = summary["messages_for_goal"]
    reached = "never (the steady ratio is below it)" if goal is None else f"{goal:,} messages"
    lines.append(f"a whole run reaches {GOAL}x Connect per CPU second at: {reached}")
    return lines
