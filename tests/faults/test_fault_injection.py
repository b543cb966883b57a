"""Nothing lost under faults: one fault per run, at every step of a batch and below it.

Each run writes three small batches (with bad rows for the dead-letter table and a new
column in batch 2) with one fault injected (see :mod:`tests.faults.harness`), restarts
where Spark would, runs the maintenance, and reads both tables back: every input row
exactly once in the table or the dead-letter table, every referenced file present, no
unreferenced file in the data folders.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from tests.faults.harness import Fault, Outcome, matrix, run_with_fault, seeded_selection

SEED = 16
SELECTION = seeded_selection(SEED, 32)


def assert_nothing_lost(outcome: Outcome) -> None:
    assert outcome.faults_fired >= 1, f"{outcome.fault.name} never fired"
    assert not outcome.lost, f"rows lost: {outcome.lost}"
    assert not outcome.duplicated, f"rows duplicated: {outcome.duplicated}"
    assert not outcome.missing_files, f"referenced files missing: {outcome.missing_files}"
    assert not outcome.unreferenced_files, f"unreferenced files left: {outcome.unreferenced_files}"


def test_the_selection_covers_every_kind_of_fault() -> None:
    kinds = {(f.kind, f.point) for f in matrix()}
    assert {(f.kind, f.point) for f in SELECTION} == kinds
    assert len(SELECTION) >= 30
    assert seeded_selection(SEED, 32) == SELECTION  # the same faults on every run


@pytest.mark.parametrize("fault", SELECTION, ids=lambda f: f.name)
def test_seeded_fault(
    spark: SparkSession,
    catalog_options: dict[str, str],
    fault: Fault,
    record_outcome: Callable[[Outcome], None],
) -> None:
    outcome = run_with_fault(spark, catalog_options, fault)
    record_outcome(outcome)
    assert_nothing_lost(outcome)


@pytest.mark.faults_full
@pytest.mark.parametrize("fault", matrix(), ids=lambda f: f.name)
def test_fault_matrix(
    spark: SparkSession,
    catalog_options: dict[str, str],
    fault: Fault,
    record_outcome: Callable[[Outcome], None],
) -> None:
    outcome = run_with_fault(spark, catalog_options, fault)
    record_outcome(outcome)
    assert_nothing_lost(outcome)
