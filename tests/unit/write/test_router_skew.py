"""Skew rules: when a batch is measured, and how hot values are split."""

from __future__ import annotations

import itertools
import math

import pytest

from icesink.route.skew import (
    MAX_EXTRA_PARTITIONS,
    MAX_SHARES_PER_VALUE,
    RETELL_AFTER,
    SPLIT_SHARE_FACTOR,
    BatchProfile,
    RoutingHistory,
    min_rows_to_split,
    needs_measurement,
    plan_splits,
    scattered_bucket,
    table_bytes_per_row,
)
from icesink.write.layout import BucketLayout, BucketSlot
from icesink.write.messages import CONTENT_POSITION_DELETES, DataFileMessage

MiB = 1024 * 1024


def message(partition: tuple[object, ...], rows: int, size: int) -> DataFileMessage:
    return DataFileMessage(path="f", partition=partition, spec_id=0, record_count=rows, file_size_bytes=size)


def test_profile_sums_files_per_partition_value() -> None:
    files = [message((1, 0), 100, 3 * MiB), message((1, 0), 50, MiB), message((2, 1), 10, MiB)]
    profile = BatchProfile.from_files(files)
    assert profile == BatchProfile(rows=160, file_bytes=5 * MiB, largest_value_bytes=4 * MiB, files=3)
    assert profile.bytes_per_row == 5 * MiB / 160


def test_profile_tells_whether_the_rows_came_from_one_spark_partition() -> None:
    files = [DataFileMessage(path="a", partition=(0,), spec_id=0, record_count=10, file_size_bytes=MiB)]
    assert BatchProfile.from_files(files, {4}).rows_in_one_partition
    assert not BatchProfile.from_files(files, {0, 4}).rows_in_one_partition
    assert not BatchProfile.from_files(files).rows_in_one_partition  # not told: not known
    history = RoutingHistory()
    history.record(files, frozenset({1}))
    assert history.last is not None and history.last.rows_in_one_partition


def test_shuffled_batches_tell_their_spark_partitions_first_then_now_and_then() -> None:
    files = [DataFileMessage(path="a", partition=(0,), spec_id=0, record_count=10, file_size_bytes=MiB)]
    history = RoutingHistory()
    assert history.tell_source_partitions()  # the first batch
    history.record(files, frozenset({0, 1}))  # it told: several
    for _ in range(RETELL_AFTER):
        assert not history.tell_source_partitions()
        history.record(files)  # not told
    assert history.tell_source_partitions()
    history.record([], frozenset({0}))  # an empty batch tells nothing
    assert history.tell_source_partitions()


def test_history_ignores_empty_batches() -> None:
    history = RoutingHistory()
    history.record([message((0,), 10, 100)], input_row_bytes=180)
    history.record([])
    assert history.last is not None and history.last.rows == 10 and history.last.input_row_bytes == 180


@pytest.mark.parametrize(
    ("largest", "table_bpr", "expected"),
    [
        (None, None, False),  # first batch into an empty table: nothing to estimate bytes with
        (None, 40.0, True),  # first batch of this sink on a table with data: measure once
        (MiB, None, False),  # previous batch had no value near a split
        (2 * MiB, None, True),
        (3 * MiB, 40.0, True),
    ],
)
def test_measurement_only_when_it_can_pay_off(
    largest: int | None, table_bpr: float | None, expected: bool
) -> None:
    last = (
        None
        if largest is None
        else BatchProfile(rows=1000, file_bytes=largest, largest_value_bytes=largest, files=1)
    )
    assert needs_measurement(last, table_bpr, target_bytes=MiB) is expected


def test_split_shares_hold_at_least_the_share_factor_of_the_target() -> None:
    target, bpr = MiB, 100.0
    rows_per_target = target / bpr
    counts = [
        (11, ("hot",), int(10 * rows_per_target)),  # 10 targets: 6 shares of ~1.67 targets
        (12, ("warm",), int(3.2 * rows_per_target)),  # 3.2 targets: 2 shares
        (13, ("big",), int(2.9 * rows_per_target)),  # under 3 targets: one task
    ]
    hot = plan_splits(counts, bpr, target, first_partition=17)
    assert [(h.partition, h.shares, h.first_partition) for h in hot] == [
        (("hot",), 6, 17),
        (("warm",), 2, 23),
    ]
    for h in hot:
        assert h.rows * bpr / h.shares >= SPLIT_SHARE_FACTOR * target
    assert min_rows_to_split(bpr, target) == math.ceil(2 * SPLIT_SHARE_FACTOR * rows_per_target)


def test_splits_are_capped() -> None:
    counts = [(i, (i,), 10**9) for i in range(40)]
    hot = plan_splits(counts, 100.0, MiB, first_partition=0)
    assert all(h.shares <= MAX_SHARES_PER_VALUE for h in hot)
    assert sum(h.shares for h in hot) == MAX_EXTRA_PARTITIONS
    assert all(h.first_partition + h.shares == n.first_partition for h, n in itertools.pairwise(hot))


def test_table_bytes_per_row_from_the_snapshot_summary() -> None:
    assert table_bytes_per_row({"total-files-size": "4000", "total-records": "100"}) == 40.0
    assert table_bytes_per_row({"total-files-size": "0", "total-records": "0"}) is None
    assert table_bytes_per_row(None) is None


def written_by(task: int, partition: tuple[object, ...], content: int = 0) -> DataFileMessage:
    return DataFileMessage(
        path=f"t{task}", partition=partition, spec_id=0, record_count=1, file_size_bytes=1, task_id=task,
        content=content,
    )  # fmt: skip


def test_a_bucket_written_by_several_tasks_is_noticed_and_remembered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Spec (day, bucket[4]): the bucket is field 1, the shuffle partition id its value.
    layout = BucketLayout((BucketSlot(position=1, num_buckets=4, nullable=True),))
    grouped = [written_by(0, (19000, 0)), written_by(0, (19001, 0)), written_by(1, (19000, 3))]
    grouped.append(written_by(1, (19000, None)))
    assert scattered_bucket(grouped, layout) is None
    # A delete file of another task in bucket 0 does not count: only data files were shuffled.
    assert scattered_bucket([*grouped, written_by(2, (19000, 0), CONTENT_POSITION_DELETES)], layout) is None
    scattered = [*grouped, written_by(2, (19001, 3)), written_by(3, (19002, None))]
    assert scattered_bucket(scattered, layout) == "bucket partition 3 to 2 tasks [1, 2] (2 of 3 buckets so)"

    history = RoutingHistory()
    history.record(scattered)  # not a bucket shuffle to check
    assert history.scattered is None
    history.record(grouped, buckets=layout)
    assert history.scattered is None
    with caplog.at_level("WARNING"):
        history.record(scattered, buckets=layout)
    assert history.scattered is not None and "bucket partition 3 to 2 tasks" in caplog.text
    assert "distribution-mode=hash" in caplog.text
    history.record(grouped, buckets=layout)  # once seen, kept: the hash shuffle is not checked
    assert history.scattered is not None
