"""benchmarks/pyiceberg_deletes.py: pyiceberg's delete application keeps exactly the rows not deleted."""

from __future__ import annotations

from benchmarks.pyiceberg_deletes import measure


def test_each_delete_count_is_timed_after_its_rows_were_checked() -> None:
    figures = measure(rows=5_000, batch_rows=1_024, repeats=1)  # raises on a wrong row count
    assert set(figures) == {"decode", "1", "50", "500"}
    assert all(ms > 0 for ms in figures.values()), figures
