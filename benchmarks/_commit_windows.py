"""A run's figures over its commits, for ``benchmarks/kafka_connect.py``: the whole run and the steady state.

A new process pays its start once (a JVM, a session, Python workers, the first batch's
planning), then a cost per message. One figure over the whole run mixes the two, and the
mix depends on how many messages the run has. So each run is also measured between its
first commit and the commit that holds its last message: the job's micro-batches after the
first, Connect's commits after the first, the CPU of the run's process tree at those two
commits read from the samples of :class:`benchmarks._process_cpu.TreeCpuSampler` (the same
way for both). What the whole run cost beyond its messages at the steady cost is its start.

With a start ``S`` and a cost per message ``c`` for each, the whole-run ratio of messages
per CPU second at ``N`` messages is ``(S_connect + N c_connect) / (S_job + N c_job)``; it
tends to ``c_connect / c_job``, and crosses 2 at ``N = (2 S_job - S_connect) /
(c_connect - 2 c_job)`` when that limit is above 2 (:func:`messages_for_ratio`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks._process_cpu import TreeCpuSampler


@dataclass(frozen=True)
class Commit:
    """One snapshot that added rows: its commit time (wall clock, seconds) and the table's rows then."""

    at: float
    rows: int


def commits_of(catalog: Any, table: str) -> list[Commit]:
    """The snapshots of ``table`` that added rows, in commit order (maintenance's rewrites left out)."""
    snapshots = sorted(catalog.load_table(table).metadata.snapshots, key=lambda s: s.sequence_number)
    commits: list[Commit] = []
    for snapshot in snapshots:
        rows = int(snapshot.summary["total-records"]) if snapshot.summary else 0
        if rows > (commits[-1].rows if commits else 0):
            commits.append(Commit(snapshot.timestamp_ms / 1000, rows))
    return commits


def run_figures(commits: list[Commit], messages: int, launched: float, cpu: TreeCpuSampler) -> dict[str, Any]:
    """The whole run (launch to the commit holding the last message) and its steady state.

    The ``steady_*`` figures (between the first commit and that last one) and the start-up
    CPU are ``None`` when the run committed everything at once (one batch).
    """
    last = next(c for c in commits if c.rows >= messages)
    first = commits[0]
    whole_cpu = cpu.at(last.at)
    steady_messages = last.rows - first.rows
    steady_s = last.at - first.at
    steady_cpu = whole_cpu - cpu.at(first.at)
    measured = steady_messages > 0 and steady_s > 0 and steady_cpu > 0
    return {
        "seconds": last.at - launched,
        "cpu_seconds": whole_cpu,
        "messages_per_s": messages / (last.at - launched),
        "messages_per_cpu_s": messages / whole_cpu,
        "commits": commits.index(last) + 1,
        "first_commit_rows": first.rows,
        "first_commit_seconds": first.at - launched,
        "first_commit_cpu_seconds": cpu.at(first.at),
        "steady_messages": steady_messages,
        "steady_seconds": steady_s,
        "steady_cpu_seconds": steady_cpu,
        "steady_messages_per_s": steady_messages / steady_s if measured else None,
        "steady_messages_per_cpu_s": steady_messages / steady_cpu if measured else None,
        "startup_cpu_seconds": whole_cpu - messages * steady_cpu / steady_messages if measured else None,
    }


def messages_for_ratio(ratio: float, job: tuple[float, float], connect: tuple[float, float]) -> float | None:
    """How many messages a whole run needs for the job's messages per CPU second to be ``ratio`` x Connect's.

    Args:
        ratio: The ratio wanted (2.0).
        job: The job's start-up CPU seconds and CPU seconds per message.
        connect: Connect's, the same.

    Returns:
        The message count, ``0.0`` when every run reaches it, ``None`` when none does (the
        per-message ratio is not above ``ratio``).
    """
    (start_job, per_job), (start_connect, per_connect) = job, connect
    if per_connect <= ratio * per_job:
        return None
    return max(0.0, (ratio * start_job - start_connect) / (per_connect - ratio * per_job))
