"""The count floor: every row handed to a Python worker as Arrow, and only counted.

Its own module so that a worker unpickling the function imports pyarrow and nothing of
the benchmarks' heavier modules.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa


def count_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A ``mapInArrow`` function (output ``n long``): one row per task, the rows it received."""
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})
