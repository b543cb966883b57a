"""The fault-injection suite: a seeded selection in ``make test``, the full matrix with ``make test-faults``.

Every outcome is tallied; the terminal summary gives faults injected, rows checked, lost
and duplicated (the figures docs/development.md describes).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.faults.harness import Outcome

OUTCOMES: list[Outcome] = []


@pytest.fixture()
def record_outcome() -> Any:
    return OUTCOMES.append


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not OUTCOMES:
        return
    fired = sum(o.faults_fired for o in OUTCOMES)
    restarts = sum(o.restarts for o in OUTCOMES)
    rows = sum(o.rows_checked for o in OUTCOMES)
    lost = sum(len(o.lost) for o in OUTCOMES)
    duplicated = sum(len(o.duplicated) for o in OUTCOMES)
    missing = sum(len(o.missing_files) for o in OUTCOMES)
    left = sum(len(o.unreferenced_files) for o in OUTCOMES)
    terminalreporter.write_line(
        f"fault injection: {len(OUTCOMES)} runs, {fired} faults injected, {restarts} restarts, "
        f"{rows} rows checked, "
        f"{lost} lost, {duplicated} duplicated, {missing} referenced files missing, "
        f"{left} unreferenced files left"
    )
