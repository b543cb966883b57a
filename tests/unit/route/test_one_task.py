"""When one write task beats a shuffle: two local cores at most, rows a task holds, one target;
for a first batch, what its plan reads."""

from __future__ import annotations

from icesink.route.one_task import one_task_holds, one_task_holds_planned
from icesink.route.skew import BatchProfile

MiB = 2**20
BUDGET = 512 * MiB
TARGET = 512 * MiB


def batch(rows: int = 1_000_000, row_bytes: int = 138, file_bytes: int = 44 * MiB) -> BatchProfile:
    """A batch of the reference workload's shape, as its write tasks reported it."""
    return BatchProfile(rows, file_bytes, file_bytes // 64, 128, input_row_bytes=row_bytes)


def test_on_two_cores_a_batch_one_task_holds_goes_to_one_task() -> None:
    assert one_task_holds(batch(), 2, BUDGET, TARGET)
    assert one_task_holds(batch(), 1, BUDGET, TARGET)


def test_more_cores_keep_the_shuffle() -> None:
    assert not one_task_holds(batch(), 3, BUDGET, TARGET)


def test_an_application_not_in_local_mode_keeps_the_shuffle() -> None:
    assert not one_task_holds(batch(), None, BUDGET, TARGET)  # two 1-core executors may be two machines


def test_rows_over_half_the_budget_keep_the_shuffle() -> None:
    assert one_task_holds(batch(rows=1_000_000, row_bytes=268), 2, BUDGET, TARGET)  # 255.6 MiB
    assert not one_task_holds(batch(rows=1_000_000, row_bytes=269), 2, BUDGET, TARGET)  # 256.5 MiB
    assert not one_task_holds(batch(), 2, 256 * MiB, TARGET)


def test_a_batch_above_the_target_keeps_the_shuffle() -> None:
    assert not one_task_holds(batch(file_bytes=44 * MiB), 2, BUDGET, 32 * MiB)


def test_nothing_known_keeps_the_shuffle() -> None:
    assert not one_task_holds(None, 2, BUDGET, TARGET)  # a first batch
    assert not one_task_holds(batch(row_bytes=0), 2, BUDGET, TARGET)  # written by the driver


def test_a_first_batch_whose_files_one_task_holds_goes_to_one_task() -> None:
    # The reference workload's 1M rows: a 40 MB file, 139 MB of Arrow (1 / 0.3: 134 MB guessed).
    assert one_task_holds_planned(40 * MiB, 2, BUDGET, TARGET)
    assert one_task_holds_planned(40 * MiB, 1, BUDGET, TARGET)
    assert one_task_holds_planned(0, 2, BUDGET, TARGET)  # empty files: nothing to hold


def test_a_first_batch_of_more_files_than_one_task_holds_keeps_the_shuffle() -> None:
    assert one_task_holds_planned(76 * MiB, 2, BUDGET, TARGET)  # 253 MiB guessed, within half the budget
    assert not one_task_holds_planned(77 * MiB, 2, BUDGET, TARGET)  # 257 MiB
    assert not one_task_holds_planned(40 * MiB, 2, 256 * MiB, TARGET)
    assert not one_task_holds_planned(40 * MiB, 2, BUDGET, 32 * MiB)  # above the target


def test_a_first_batch_keeps_the_shuffle_on_more_cores_or_without_files() -> None:
    assert not one_task_holds_planned(40 * MiB, 3, BUDGET, TARGET)
    assert not one_task_holds_planned(40 * MiB, None, BUDGET, TARGET)  # not local mode
    assert not one_task_holds_planned(None, 2, BUDGET, TARGET)  # a Kafka batch: nothing known
