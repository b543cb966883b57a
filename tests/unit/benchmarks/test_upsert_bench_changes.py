"""The upsert benchmark: its change stream (mix, seed, expected state) and its summary."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from benchmarks._upsert_changes import ChangeStream, rows, same_rows
from benchmarks._upsert_report import summarize


def _apply(state: dict[int, int], batch: pa.Table) -> None:
    for change in batch.to_pylist():
        if change["_op"] == "d":
            del state[change["id"]]
        else:
            state[change["id"]] = change["version"]


def test_batches_mix_distinct_keys_and_the_expected_state_follows_them() -> None:
    stream = ChangeStream(1000, seed=7)
    state = dict.fromkeys(range(1000), 0)
    for version in range(1, 6):
        batch = stream.batch(version, 200)
        ops = Counter(batch.column("_op").to_pylist())
        ids = batch.column("id").to_pylist()
        live_before = set(state)
        assert ops == {"u": 140, "c": 40, "d": 20}
        assert len(set(ids)) == 200
        for change in batch.to_pylist():
            assert (change["id"] in live_before) == (change["_op"] != "c")
            if change["_op"] != "d":
                assert change == {**rows([change["id"]], version).to_pylist()[0], "_op": change["_op"]}
        _apply(state, batch)
    expected = stream.expected()
    assert (
        dict(zip(expected.column("id").to_pylist(), expected.column("version").to_pylist(), strict=True))
        == state
    )
    assert stream.live == len(state) == 1000 + 5 * 20


def test_same_seed_same_stream_and_same_rows_names_a_difference() -> None:
    first, second = ChangeStream(500, seed=3), ChangeStream(500, seed=3)
    assert first.batch(1, 100).equals(second.batch(1, 100))
    assert not first.batch(2, 100).equals(ChangeStream(500, seed=4).batch(1, 100))

    expected = first.expected()
    assert same_rows(expected.select(["version", "id"]), expected) is None
    older = expected.set_column(1, "version", pa.array([0] * expected.num_rows, pa.int32()))
    assert same_rows(older, expected) == "column version differs from the expected state"
    assert (
        same_rows(expected.slice(1), expected)
        == f"{expected.num_rows - 1} rows, expected {expected.num_rows}"
    )


def test_the_summary_gives_the_median_and_the_99th_percentile_of_plan_and_commit() -> None:
    fields = [
        "changes_per_s",
        "files_read",
        "files_in_table",
        "buckets_read",
        "keys_per_task_mean",
        "rows_read",
        "row_groups_skipped",
        "delete_files_written",
        "data_files_written",
        "lookup_s",
        "change_frames_s",
        "write_s",
    ]
    batches = [
        {"batch": n, "changes": 10, "plan_and_commit_s": float(n), **dict.fromkeys(fields, 1.0)}
        for n in range(1, 102)  # batch 1 warms up: 2..101 are counted
    ]
    summary = summarize({"icesink": batches, "pyiceberg": []})
    assert summary["plan_and_commit_p50_p99"] == [51.5, 100.01]
