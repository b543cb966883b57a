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

The rows are sorted as numbers, not as strings (:func:`sorted_deletes`): a file's rows point
at a few data files, so the paths are dictionary-encoded (the maintenance reads them so,
:class:`~icesink.upsert.delete_merge.DeletePositions`),
only the few distinct paths are sorted as strings, and the rows are sorted and deduplicated by
one integer each, their path's rank and their position. Hashing and sorting the path of every
row cost a maintenance run more than reading the positions did (``benchmarks/LOG.md``,
2026-12-02, "where a steady upsert batch's driver time goes at 10M keys"). The file is the same:
rows by path (UTF-8 byte order, as Arrow sorts strings), then position.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.conversions import to_bytes
from pyiceberg.io import FileIO
from pyiceberg.types import LongType, StringType

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

PATHS = pa.dictionary(pa.int32(), pa.string())
"""The ``file_path`` column as :func:`sorted_deletes` takes it: a few paths, each for many rows."""

_WRITTEN = pa.schema(
    [POSITION_DELETE_SCHEMA.field("file_path").with_type(PATHS), POSITION_DELETE_SCHEMA.field("pos")]
)
"""The rows as written: Parquet stores the paths' dictionary as it is (no path hashed again), and
the file's schema is :data:`POSITION_DELETE_SCHEMA` (no Arrow schema stored, so readers see strings)."""

# Rows per row group: a delete file is read whole by every reader, so row groups only
# bound the memory of writing and reading it.
ROW_GROUP_ROWS = 1 << 20

# The paths repeat (a few data files a file) and the positions are unique within a data file:
# a dictionary pays for the one and would only add its indices to the other (dictionary.py's test).
USE_DICTIONARY = ["file_path"]


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
        self._paths: list[pa.Array] = []
        self._positions: list[pa.Array] = []
        self._buffered = 0
        self._closed = False
        self._result: DataFileMessage | None = None

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        """Buffer rows with columns ``file_path`` (strings, or dictionary-encoded strings) and
        ``pos`` (other columns are ignored)."""
        if self._closed:
            raise RuntimeError(f"write after close of {self.path}")
        if batch.num_rows == 0:
            return
        paths, positions = batch.column("file_path"), batch.column("pos").cast(pa.int64())
        self._paths.append(paths)
        self._positions.append(positions)
        self._buffered += paths.nbytes + positions.nbytes

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
        if not self._paths:
            return
        rows, referenced = sorted_deletes(dictionary_paths(self._paths), _int64s(self._positions))
        self._paths, self._positions = [], []
        with self._io.new_output(self.path).create(overwrite=False) as stream:
            writer = pq.ParquetWriter(
                stream,
                _WRITTEN,
                compression=self._compression,
                use_dictionary=USE_DICTIONARY,
                store_schema=False,
            )
            writer.write_table(rows, row_group_size=ROW_GROUP_ROWS)
            writer.close()
        metadata = writer.writer.metadata
        self._result = _message(
            self.path, self._io, rows, referenced, metadata, self._partition, self._spec_id
        )

    def result(self) -> DataFileMessage | None:
        """The file's message; only after :meth:`close`."""
        if not self._closed:
            raise RuntimeError(f"result() before close() of {self.path}")
        return self._result


def dictionary_paths(chunks: Iterable[pa.Array | pa.ChunkedArray]) -> pa.DictionaryArray:
    """Path columns (strings or dictionary-encoded strings) as one dictionary-encoded array."""
    encoded = []
    for chunk in chunks:
        for array in chunk.chunks if isinstance(chunk, pa.ChunkedArray) else [chunk]:
            if pa.types.is_dictionary(array.type):
                encoded.append(array.cast(PATHS) if array.type != PATHS else array)
            else:
                encoded.append(pc.dictionary_encode(array.cast(pa.string())))
    if not encoded:
        return pa.array([], PATHS)
    combined = pa.chunked_array(encoded, PATHS).unify_dictionaries().combine_chunks()
    assert isinstance(combined, pa.DictionaryArray)
    return combined


def sorted_deletes(paths: pa.DictionaryArray, positions: pa.Array) -> tuple[pa.Table, list[str]]:
    """The rows (``paths``, ``positions``) sorted by path, then position, without duplicates (their
    paths dictionary-encoded, as written), and the paths they refer to, sorted (see the module).

    Raises:
        ValueError: A null path or position, or a negative position: no delete file can hold them.
    """
    if paths.null_count or positions.null_count:
        raise ValueError("position deletes with a null file_path or pos: every row needs both")
    if len(positions) == 0:
        return _WRITTEN.empty_table(), []
    pos = positions.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    lowest, highest = int(pos.min()), int(pos.max())
    if lowest < 0:
        raise ValueError(f"position {lowest} in position deletes: positions count rows from 0")
    dictionary = paths.dictionary
    order = pc.sort_indices(dictionary).to_numpy()
    rank = np.empty(len(order), np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    codes = rank[paths.indices.to_numpy(zero_copy_only=False)]
    shift = max(highest.bit_length(), 1)
    if (len(order) - 1).bit_length() + shift <= 63:  # one integer a row: rank, then position
        keys = np.sort((codes << shift) | pos)  # not np.unique: it hashes, 15-35x slower here
        keys = keys[np.diff(keys, prepend=-1) != 0]
        codes, pos = keys >> shift, keys & ((1 << shift) - 1)
    else:  # positions past 2**(63 - rank bits): two sort keys
        order_of_rows = np.lexsort((pos, codes))
        codes, pos = codes[order_of_rows], pos[order_of_rows]
        new = (np.diff(codes, prepend=-1) != 0) | (np.diff(pos, prepend=-1) != 0)
        codes, pos = codes[new], pos[new]
    firsts = np.diff(codes, prepend=-1) != 0  # the first row of each path
    referenced = dictionary.take(pa.array(order[codes[firsts]]))
    dense = (np.cumsum(firsts) - 1).astype(np.int32)  # each row's path among those referenced
    rows = pa.Table.from_arrays(
        [pa.DictionaryArray.from_arrays(dense, referenced), pa.array(pos, pa.int64())], schema=_WRITTEN
    )
    return rows, referenced.to_pylist()


def _int64s(chunks: list[pa.Array | pa.ChunkedArray]) -> pa.Array:
    combined = pa.chunked_array(
        [a for c in chunks for a in (c.chunks if isinstance(c, pa.ChunkedArray) else [c])], pa.int64()
    ).combine_chunks()
    return combined


def _message(
    path: str,
    io: FileIO,
    rows: pa.Table,
    referenced: list[str],
    metadata: pq.FileMetaData,
    partition: tuple[Any, ...],
    spec_id: int,
) -> DataFileMessage:
    """The delete file's message, its statistics computed from the (sorted) rows themselves."""
    count = rows.num_rows
    min_max = pc.min_max(rows.column("pos")).as_py()
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
            FILE_PATH_FIELD_ID: to_bytes(StringType(), referenced[0]),
            POS_FIELD_ID: to_bytes(LongType(), min_max["min"]),
        },
        upper_bounds={
            FILE_PATH_FIELD_ID: to_bytes(StringType(), referenced[-1]),
            POS_FIELD_ID: to_bytes(LongType(), min_max["max"]),
        },
        split_offsets=split_offsets,
        content=CONTENT_POSITION_DELETES,
        referenced_files=tuple(referenced),  # sorted, as the rows are
    )
