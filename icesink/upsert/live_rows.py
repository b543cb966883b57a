"""The live rows of data files: each read whole, the positions its delete files delete left out.

A compaction (:mod:`icesink.upsert.compaction`) rewrites the rows of a partition's data files that
no delete file deletes. It has read the partition's delete files already
(:class:`~icesink.upsert.delete_merge.DeletePositions`, shared with the merge of those files), so
each data file is read as it is and its deleted positions left out with a mask: a position delete
is a row number within its data file. Which delete files apply to a data file is the spec's rule
(``DeleteFileIndex``: its partition, a data sequence number at least the data file's, its path
within the delete file's bounds), as pyiceberg's reader applies it.

A file written in the table's current schema, as the sink writes it (names, types and field ids
those of :func:`~icesink.type_mapping.iceberg_to_arrow_schema`), is read with pyarrow's Parquet
reader, as the file's own columns. Any other file (written before the schema changed, or by
another writer, say with other types or without field ids) is read through pyiceberg's reader,
which projects it onto the current schema by field id; its deletes are left out the same way.
Re-planning every file through pyiceberg's reader with its deletes read again cost a compaction
about as much as the rest of it (``benchmarks/LOG.md``, 2026-12-02, "where a steady upsert
batch's driver time goes at 10M keys").
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.manifest import ManifestEntry
from pyiceberg.table import FileScanTask, Table
from pyiceberg.table.delete_file_index import DeleteFileIndex

from icesink.errors import UpsertError
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.upsert.delete_merge import DeletePositions


def live_rows(
    table: Table, data: Sequence[ManifestEntry], index: DeleteFileIndex, positions: DeletePositions
) -> pa.Table:
    """The rows of the data files ``data`` that no delete file applying to them deletes, in the
    table's current schema (the sink's file schema), file after file, in file order.

    Args:
        table: The table.
        data: The data files' entries (one partition's, say).
        index: The delete files that may apply to them.
        positions: Those delete files' positions, read.
    """
    schema = iceberg_to_arrow_schema(table.schema())
    parts = [schema.empty_table()]
    for entry in data:
        file = entry.data_file
        applying = index.for_data_file(entry.sequence_number or 0, file, file.partition)
        rows = _read(table, entry, schema)
        if rows.num_rows != file.record_count:
            raise UpsertError(
                f"data file {file.file_path} holds {rows.num_rows} rows, its manifest says "
                f"{file.record_count}: a compaction rewrites only files it reads whole",
                table=".".join(table.name()),
            )
        deleted = positions.of([d.file_path for d in applying], file.file_path)
        parts.append(_without(rows, deleted))
    return pa.concat_tables(parts)


def _read(table: Table, entry: ManifestEntry, schema: pa.Schema) -> pa.Table:
    """Every row of the data file, in ``schema`` (see the module)."""
    with table.io.new_input(entry.data_file.file_path).open() as stream:
        parquet = pq.ParquetFile(stream)
        if parquet.schema_arrow.equals(schema, check_metadata=True):
            return parquet.read()
    task = FileScanTask(entry.data_file)  # no delete files: they are applied by position below
    rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([task])
    return pa.Table.from_arrays(
        [c.cast(f.type) for c, f in zip(rows.columns, schema, strict=True)], schema=schema
    )


def _without(rows: pa.Table, deleted: np.ndarray) -> pa.Table:
    """``rows`` without the row numbers ``deleted``."""
    if len(deleted) == 0:
        return rows
    keep = np.ones(rows.num_rows, dtype=bool)
    keep[deleted[(deleted >= 0) & (deleted < rows.num_rows)]] = False
    return rows.filter(pa.array(keep))
