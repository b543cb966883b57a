"""What :mod:`benchmarks.upsert` measures after its batches: full scans, checked, and compaction."""

from __future__ import annotations

import statistics
import time
from typing import Any

from pyiceberg.table import Table

from benchmarks import _upsert_changes as model
from icesink.upsert.compaction import compact_partition
from tests.support.duckdb_reader import duckdb_read


def _reads(table: Table, stream: model.ChangeStream, repeats: int) -> dict[str, Any]:
    """Median time of a full scan through pyiceberg and through DuckDB, each checked against the model."""
    table.refresh()
    expected = stream.expected()
    figures: dict[str, Any] = _file_counts(table)
    readers = {
        "pyiceberg_s": lambda: table.scan().to_arrow(),
        "duckdb_s": lambda: duckdb_read(table.metadata_location),
    }
    for name, read in readers.items():
        times = []
        for _ in range(repeats):
            started = time.perf_counter()
            rows = read()
            times.append(time.perf_counter() - started)
            wrong = model.same_rows(rows, expected)
            if wrong:
                raise SystemExit(f"{name.removesuffix('_s')} read of the icesink table: {wrong}")
            del rows
        figures[name] = statistics.median(times)
    figures["rows"] = expected.num_rows
    return figures


def _file_counts(table: Table) -> dict[str, int]:
    data: set[str] = set()
    deletes: set[str] = set()
    for task in table.scan().plan_files():
        data.add(task.file.file_path)
        deletes.update(d.file_path for d in task.delete_files)
    return {"data_files": len(data), "delete_files": len(deletes)}


def _compact(table: Table, buckets: int) -> dict[str, Any]:
    started = time.perf_counter()
    results = [compact_partition(table, (bucket,)) for bucket in range(buckets)]
    return {
        "seconds": time.perf_counter() - started,
        "rewritten_data_files": sum(r.rewritten_data_files for r in results),
        "removed_delete_files": sum(r.removed_delete_files for r in results),
        "added_data_files": sum(r.added_data_files for r in results),
    }
