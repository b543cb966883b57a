"""One position delete file: the rows of data files a change removes, by path and position.

Iceberg's position delete files (format v2) are Parquet files with two required columns,
``file_path`` (string, reserved field id 2147483546) and ``pos`` (long, 2147483545), their
rows sorted by path, then position. A file belongs to one partition, the partition of the
data files it points at (one or many of them), and deletes rows of files whose data
sequence number is at most its own.

The statistics are written in full (no truncation of the path): a reader uses the
``file_path`` bounds to find the data files a delete file may apply to; when both bounds
are the same path, it knows that the file refers to that one data file only (pyiceberg
and Iceberg Java index such files by path, the v2 form of ``referenced_data_file``, which
pyiceberg 0.12's v2 ``DataFile`` has no field for). The message of a file lists the data
files it refers to (``referenced_files``) for the commit's conflict check.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.io import FileIO
from pyiceberg.types import LongType, StringType

from icesink.write.dictionary import DictionaryColumns
from icesink.write.messages import CONTENT_POSITION_DELETES, DataFileMessage

FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545

POSITION_DELETE_SCHEMA = pa.schema(
    [
        pa.field(
            "file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(FILE_PATH_FIELD_ID)}
        ),
        pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_FIELD_ID)}),
    ]
)
"""The Arrow schema of a position delete file, with Iceberg's reserved field ids."""

# Rows per row group: a delete file is read whole by every reader, so row groups only
# bound the memory of writing and reading it.
ROW_GROUP_ROWS = 1 << 20


class PositionDeleteWriter:
    """Writes one position delete file for the rows of one partition (of one or many data files).

    Follows the writer lifecycle of :class:`~icesink.write.protocol.FileWriter`: batches of
    ``file_path``/``pos`` are buffered, :meth:`close` sorts them by path, then position,
    drops duplicates and writes the file; :meth:`result` is its message (``None`` when no
    row was written: no file exists then).

    Args:
        io: FileIO that creates the file.
        path: Full URI of the file to create.
        partition: Partition values (Iceberg representation) of the data files referred to.
        spec_id: Their partition spec id.
        compression: Parquet codec.
    """

    def __init__(
        self, io: FileIO, path: str, partition: tuple[Any, ...], spec_id: int, compression: str
    ) -> None:
        self.path = path
        self._io = io
        self._partition = partition
        self._spec_id = spec_id
        self._compression = compression
        self._batches: list[pa.RecordBatch] = []
        self._buffered = 0
        self._closed = False
        self._result: DataFileMessage | None = None

    def write(self, batch: pa.RecordBatch) -> None:
        """Buffer rows with columns ``file_path`` and ``pos`` (other columns are ignored)."""
        if self._closed:
            raise RuntimeError(f"write after close of {self.path}")
        if batch.num_rows == 0:
            return
        rows = pa.RecordBatch.from_arrays(
            [batch.column("file_path").cast(pa.string()), batch.column("pos").cast(pa.int64())],
            schema=POSITION_DELETE_SCHEMA,
        )
        self._batches.append(rows)
        self._buffered += rows.nbytes

    def length_bytes(self) -> int:
        """Bytes buffered: nothing reaches storage before :meth:`close`."""
        return self._buffered

    def buffered_bytes(self) -> int:
        """Arrow bytes held in memory."""
        return self._buffered

    def close(self) -> None:
        """Sort, write the file and compute its statistics (safe twice)."""
        if self._closed:
            return
        self._closed = True
        if not self._batches:
            return
        rows = sorted_deletes(pa.Table.from_batches(self._batches, schema=POSITION_DELETE_SCHEMA))
        self._batches = []
        dictionary = DictionaryColumns(POSITION_DELETE_SCHEMA)  # the positions are mostly unique
        dictionary.sample(rows)
        with self._io.new_output(self.path).create(overwrite=False) as stream:
            writer = pq.ParquetWriter(
                stream,
                POSITION_DELETE_SCHEMA,
                compression=self._compression,
                use_dictionary=dictionary.use_dictionary,
            )
            writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
            writer.close()
        metadata = writer.writer.metadata
        self._result = _message(self.path, self._io, rows, metadata, self._partition, self._spec_id)

    def result(self) -> DataFileMessage | None:
        """The file's message; only after :meth:`close`."""
        if not self._closed:
            raise RuntimeError(f"result() before close() of {self.path}")
        return self._result


def sorted_deletes(rows: pa.Table) -> pa.Table:
    """``rows`` (``file_path``, ``pos``) sorted by path, then position, without duplicates."""
    unique = rows.group_by(["file_path", "pos"], use_threads=False).aggregate([])
    order = pc.sort_indices(unique, sort_keys=[("file_path", "ascending"), ("pos", "ascending")])
    return unique.take(order).select(["file_path", "pos"]).cast(POSITION_DELETE_SCHEMA)


def _message(
    path: str,
    io: FileIO,
    rows: pa.Table,
    metadata: pq.FileMetaData,
    partition: tuple[Any, ...],
    spec_id: int,
) -> DataFileMessage:
    """The delete file's message, its statistics computed from the (sorted) rows themselves."""
    count = rows.num_rows
    paths, positions = rows.column("file_path"), rows.column("pos")
    min_max = pc.min_max(positions).as_py()
    column_sizes = {FILE_PATH_FIELD_ID: 0, POS_FIELD_ID: 0}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index, field_id in enumerate((FILE_PATH_FIELD_ID, POS_FIELD_ID)):
            column_sizes[field_id] += row_group.column(index).total_compressed_size
    split_offsets = tuple(
        metadata.row_group(g).column(0).dictionary_page_offset
        or metadata.row_group(g).column(0).data_page_offset
        for g in range(metadata.num_row_groups)
    )
    return DataFileMessage(
        path=path,
        partition=partition,
        spec_id=spec_id,
        record_count=count,
        file_size_bytes=len(io.new_input(path)),
        column_sizes=column_sizes,
        value_counts={FILE_PATH_FIELD_ID: count, POS_FIELD_ID: count},
        null_value_counts={FILE_PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={
            FILE_PATH_FIELD_ID: to_bytes(StringType(), paths[0].as_py()),
            POS_FIELD_ID: to_bytes(LongType(), min_max["min"]),
        },
        upper_bounds={
            FILE_PATH_FIELD_ID: to_bytes(StringType(), paths[count - 1].as_py()),
            POS_FIELD_ID: to_bytes(LongType(), min_max["max"]),
        },
        split_offsets=split_offsets,
        content=CONTENT_POSITION_DELETES,
        referenced_files=tuple(pc.unique(paths).to_pylist()),  # sorted, as the rows are
    )
