"""Full scans of the upsert benchmarks' tables, checked, and compaction.

:func:`_reads` times a full scan through pyiceberg and DuckDB and checks the rows read;
:func:`compacted_reads` does the same on the table's rows written freshly compacted (a copy,
one file per partition, dropped afterwards): what the same rows cost a reader without the
stream's history; :func:`_compact` compacts every bucket of a table in place.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from pyiceberg.catalog import Catalog
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


def compacted_reads(catalog: Catalog, table: Table, stream: model.ChangeStream, name: str) -> dict[str, Any]:
    """:func:`_reads` of ``table``'s rows written by pyiceberg into a new table ``name`` (its spec, sorted by
    key, one file per partition), and the seconds the copy took; the copy is dropped with its files."""
    started = time.perf_counter()
    rows = table.scan().to_arrow().sort_by(model.KEY)
    copy = catalog.create_table(name, table.schema(), partition_spec=table.spec())
    copy.append(rows)
    del rows
    copy_s = time.perf_counter() - started
    try:
        return {**_reads(copy, stream, 1), "copy_s": copy_s}
    finally:
        catalog.purge_table(name)


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
