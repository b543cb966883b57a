"""pyiceberg's ``Table.upsert`` as the upsert benchmarks' reference: a table of the same files, its batches.

:func:`reference_table` makes a second table that commits the data files of the measured one:
the same rows at the start. :func:`pyiceberg_batch` applies a batch of changes to it the way a
pyiceberg user does (``Table.upsert`` of the new row versions, ``Table.delete`` of the deleted
keys) and times it; :func:`same_tables` checks that both tables then hold the same rows.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog
from pyiceberg.expressions import In
from pyiceberg.table import Table

from benchmarks import _upsert_changes as model
from benchmarks._session import _log


def op_counts(changes: pa.Table) -> dict[str, int]:
    """How many changes of each op (``u``, ``c``, ``d``) a batch holds."""
    ops = changes.column(model.OP)
    return {op: int(pc.sum(pc.equal(ops, op)).as_py() or 0) for op in ("u", "c", "d")}


def reference_table(catalog: Catalog, table: Table, name: str) -> Table:
    """A new table ``name`` of ``table``'s schema and spec that commits ``table``'s data files."""
    properties = {"format-version": "2", **table.properties}
    reference = catalog.create_table(name, table.schema(), partition_spec=table.spec(), properties=properties)
    with reference.transaction() as tx, tx.update_snapshot().fast_append() as append:
        for task in table.scan().plan_files():
            append.append_data_file(task.file)
    return reference


def pyiceberg_batch(table: Table, changes: pa.Table, updates: int, inserts: int) -> dict[str, Any]:
    """``Table.upsert`` of the batch's new row versions, then ``Table.delete`` of its deleted keys."""
    arrow_schema = table.schema().as_arrow()
    is_delete = pc.equal(changes.column(model.OP), "d")
    upserts = changes.filter(pc.invert(is_delete)).drop_columns([model.OP]).cast(arrow_schema)
    deleted = changes.filter(is_delete).column(model.KEY).to_pylist()
    started = time.perf_counter()
    result = table.upsert(upserts, join_cols=[model.KEY])
    upserted = time.perf_counter()
    if deleted:
        table.delete(In(term=model.KEY, literals=deleted))
    seconds = time.perf_counter() - started
    if (result.rows_updated, result.rows_inserted) != (updates, inserts):
        raise SystemExit(
            f"pyiceberg's upsert updated {result.rows_updated} and inserted {result.rows_inserted} rows, "
            f"expected {updates} and {inserts}"
        )
    return {
        "changes": changes.num_rows,
        "seconds": seconds,
        "changes_per_s": changes.num_rows / seconds,
        "upsert_s": upserted - started,
        "delete_s": seconds - (upserted - started),
    }


def same_tables(icesink: Table, snapshot_id: int, reference: Table) -> None:
    """Fail unless the icesink table at ``snapshot_id`` holds the reference's rows (every column)."""
    mine = icesink.scan(snapshot_id=snapshot_id).to_arrow().sort_by(model.KEY)
    theirs = reference.scan().to_arrow().sort_by(model.KEY)
    theirs = theirs.cast(mine.schema)  # pyiceberg's own files read as large_string
    differ = [n for n in mine.column_names if not mine.column(n).equals(theirs.column(n))]
    if mine.num_rows != theirs.num_rows or differ:
        raise SystemExit(
            f"icesink's table at snapshot {snapshot_id} ({mine.num_rows} rows) differs from pyiceberg's "
            f"({theirs.num_rows} rows) in columns {differ}"
        )
    _log(f"icesink's and pyiceberg's tables hold the same {mine.num_rows:,} rows")
