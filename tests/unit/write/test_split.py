from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as s

from icesink.write.split import COUNTING_SORT_SPAN, chunked, split_by_key


@settings(max_examples=60, deadline=None)
@given(
    rows=s.lists(
        s.tuples(s.one_of(s.none(), s.integers(-3, 3)), s.one_of(s.none(), s.sampled_from(["a", "b", "ü"]))),
        min_size=1,
        max_size=200,
    )
)
def test_every_row_lands_in_its_key(rows: list[tuple[int | None, str | None]]) -> None:
    k1 = pa.array([r[0] for r in rows], pa.int32())
    k2 = pa.array([r[1] for r in rows], pa.string())
    data = pa.record_batch({"pos": pa.array(range(len(rows)), pa.int64())})
    seen: Counter[tuple[object, ...]] = Counter()
    positions = []
    for key, part in split_by_key([k1, k2], data):
        for pos in part.column("pos").to_pylist():
            assert rows[pos] == key
            positions.append(pos)
        seen[key] += 1
    assert sorted(positions) == list(range(len(rows)))
    assert all(n == 1 for n in seen.values())  # each key yielded once


@pytest.mark.parametrize("values", [64, COUNTING_SORT_SPAN, COUNTING_SORT_SPAN + 1, 50_000])
def test_each_key_keeps_its_rows_in_input_order_whichever_sort_runs(values: int) -> None:
    rows = 60_000
    keys = np.random.default_rng(values).integers(0, values, rows)
    keys[:values] = np.arange(values)  # every value present: the codes span all of them
    data = pa.record_batch({"pos": pa.array(range(rows), pa.int64())})
    expected: dict[int, list[int]] = {}
    for pos, key in enumerate(keys.tolist()):
        expected.setdefault(key, []).append(pos)
    parts = {key[0]: part.column("pos").to_pylist() for key, part in split_by_key([pa.array(keys)], data)}
    assert parts == expected


def test_single_key_is_not_copied() -> None:
    data = pa.record_batch({"x": pa.array([1, 2, 3])})
    [(key, part)] = list(split_by_key([pa.array([5, 5, 5])], data))
    assert key == (5,) and part is data


def test_no_keys_means_one_group() -> None:
    data = pa.record_batch({"x": pa.array([1, 2])})
    assert [k for k, _ in split_by_key([], data)] == [()]


@settings(max_examples=60, deadline=None)
@given(sizes=s.lists(s.integers(0, 50), max_size=30), target_rows=s.integers(1, 120))
def test_chunked_merges_batches_up_to_the_target_and_keeps_all_rows(
    sizes: list[int], target_rows: int
) -> None:
    batches, start = [], 0
    for size in sizes:
        batches.append(pa.record_batch({"pos": pa.array(range(start, start + size), pa.int64())}))
        start += size
    row_bytes = 8
    chunks = list(chunked(iter(batches), target_rows * row_bytes))
    assert [p for c in chunks for p in c.column("pos").to_pylist()] == list(range(start))
    assert all(c.num_rows > 0 for c in chunks)
    # every chunk but the last reached the target; none holds a batch it did not need
    for chunk in chunks[:-1]:
        assert chunk.num_rows >= target_rows
        assert chunk.num_rows < target_rows + max(sizes)
