"""How a lookup job's tasks are cut into Spark tasks: whole partitions each, as many as the work needs.

A Spark task of the lookup writes one position delete file per partition it found rows
in (:func:`~icesink.upsert.lookup.lookup_and_write`). So every lookup task of one partition
(same table, spec and partition values) goes to the same Spark task, and a batch adds at
most ONE delete file per partition it touches, whatever the number of cores.

The number of Spark tasks follows the work, not ``spark.sql.shuffle.partitions``: at most
one per touched partition and at most the cores given (the application's default
parallelism). Partitions are dealt to the Spark tasks largest first, each to the task with
the fewest data file rows so far, so a few large partitions do not land on one core.
A batch of 1,000 changes touching 4 partitions runs 4 Spark tasks (or fewer, on fewer
cores), not 200 that each pay a Python worker's fixed cost and write their own delete
file per partition.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Sequence
from typing import Any

from icesink.upsert.messages import LookupTask
from icesink.write.messages import encode_keys

KEY_SET, TASK = 0, 1  # the kinds of input rows of a lookup job

WireRow = tuple[int, int, str, int]
"""``(lookup, kind, text, slice)``: one input row of a lookup job."""


def partition_of(lookup: int, task: LookupTask) -> tuple[int, int, str]:
    """The partition a lookup task's matches are deleted in: its table's lookup, spec and values."""
    return lookup, task.spec_id, repr(task.partition)


def by_partition(task: LookupTask) -> tuple[int, str, str]:
    """Sort key: the tasks of a partition next to each other (they share their delete files)."""
    return task.spec_id, repr(task.partition), task.data_file


def deal_partitions(work: Sequence[tuple[int, LookupTask]], cores: int) -> list[list[tuple[int, LookupTask]]]:
    """The lookup tasks ``(lookup, task)`` in Spark tasks: whole partitions each, at most ``cores`` of them.

    Returns:
        One list per Spark task (none empty), its tasks ordered by lookup, then partition.
    """
    partitions: dict[tuple[int, int, str], list[tuple[int, LookupTask]]] = {}
    for n, task in work:
        partitions.setdefault(partition_of(n, task), []).append((n, task))
    slices = max(1, min(cores, len(partitions)))
    loads: list[tuple[int, int]] = [(0, s) for s in range(slices)]  # (rows so far, slice)
    dealt: list[list[tuple[int, LookupTask]]] = [[] for _ in range(slices)]
    largest_first = sorted(partitions.items(), key=lambda item: (-_rows(item[1]), item[0]))
    for _, tasks in largest_first:
        rows, s = heapq.heappop(loads)
        dealt[s] += tasks
        heapq.heappush(loads, (rows + _rows(tasks), s))
    return [sorted(d, key=lambda item: (item[0], *by_partition(item[1]))) for d in dealt if d]


def wire_rows(dealt: list[list[tuple[int, LookupTask]]]) -> list[WireRow]:
    """The job's input rows: each task after the key set it refers to, shipped once per Spark task."""
    rows: list[WireRow] = []
    for part, tasks in enumerate(dealt):
        shipped: dict[int, str] = {}  # the key table's id -> key set name
        for n, task in tasks:
            shared = task.partition_keys
            if shared is None:
                rows.append((n, TASK, task.to_json(), part))
                continue
            name = shipped.get(id(shared))
            if name is None:
                name = shipped[id(shared)] = f"k{part}-{len(shipped)}"
                rows.append((n, KEY_SET, json.dumps([name, encode_keys(shared)]), part))
            rows.append((n, TASK, task.to_json(key_set=name), part))
    return rows


def _rows(tasks: list[tuple[int, Any]]) -> int:
    return sum(max(1, task.record_count) for _, task in tasks)
