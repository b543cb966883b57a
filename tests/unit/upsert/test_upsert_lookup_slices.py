"""Lookup tasks dealt to Spark tasks: whole partitions each, no more Spark tasks than partitions or cores."""

from __future__ import annotations

import json

import pyarrow as pa

from icesink.upsert.lookup_slices import KEY_SET, TASK, deal_partitions, wire_rows
from icesink.upsert.messages import LookupTask
from icesink.write.messages import decode_keys

KEYS = pa.table({"id": pa.array([1, 2], pa.int64())})


def _task(index: int, bucket: int, rows: int, keys: pa.Table | None = None) -> LookupTask:
    return LookupTask(index, f"file:///t/b{bucket}-{index}.parquet", 0, (bucket,), rows, (1,), KEYS, (), keys)


def test_a_partition_is_never_cut_and_spark_tasks_follow_the_work() -> None:
    # 3 partitions of table 0 (4 files each), 1 partition of table 1 with the same values.
    work = [(0, _task(i, i % 3, 100)) for i in range(12)] + [(1, _task(20, 0, 100))]

    for cores in (1, 2, 3, 200):
        dealt = deal_partitions(work, cores)
        assert len(dealt) == min(cores, 4)
        owners: dict[tuple[int, tuple[int, ...]], int] = {}
        for s, tasks in enumerate(dealt):
            for n, task in tasks:
                assert owners.setdefault((n, task.partition), s) == s, "a partition in two Spark tasks"
        assert sorted(t.index for d in dealt for _, t in d) == sorted(t.index for _, t in work)


def test_partitions_are_balanced_by_rows_largest_first() -> None:
    work = [(0, _task(0, 0, 1000)), (0, _task(1, 1, 600)), (0, _task(2, 2, 500)), (0, _task(3, 3, 100))]

    dealt = deal_partitions(work, 2)

    loads = sorted(sum(t.record_count for _, t in d) for d in dealt)
    assert loads == [1100, 1100]


def test_a_partition_s_keys_travel_once_not_once_per_file() -> None:
    shared = pa.table({"id": pa.array(range(1000), pa.int64()), "region": ["eu"] * 1000})
    other = pa.table({"id": pa.array([5], pa.int64()), "region": ["us"]})
    tasks = [
        LookupTask(n, f"file:///d{n}.parquet", 0, (p,), 600, (1, 7), keys.slice(0, 3), (), keys)
        for n, (p, keys) in enumerate([(1, shared)] * 6 + [(2, other)] * 2)
    ]
    rows = wire_rows(deal_partitions([(0, t) for t in tasks], 2))  # a Spark task per partition

    key_sets = [r for r in rows if r[1] == KEY_SET]
    assert [(r[3], json.loads(r[2])[0]) for r in key_sets] == [(0, "k0-0"), (1, "k1-0")]
    decoded = {name: decode_keys(encoded) for name, encoded in (json.loads(r[2]) for r in key_sets)}
    received = [LookupTask.from_json(r[2], decoded) for r in rows if r[1] == TASK]
    assert [t.keys.num_rows for t in received] == [1000] * 6 + [1] * 2  # the partition's keys
    assert [t.data_file for t in received] == [t.data_file for t in tasks]
    assert sum(len(r[2]) for r in rows if r[1] == TASK) < len(key_sets[0][2])  # tasks carry no keys
