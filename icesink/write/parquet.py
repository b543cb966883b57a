"""One Parquet data file: buffered row groups, on-disk size tracking, footer statistics."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO, OutputStream
from pyiceberg.schema import Schema

from icesink import failpoints
from icesink._pyiceberg import StatisticsPlan, footer_statistics, statistics_plan
from icesink.write.dictionary import DictionaryColumns
from icesink.write.messages import DataFileMessage, encode_keys
from icesink.write.protocol import FileWriter

# Before the first row group of a task is on disk, assume Parquet shrinks Arrow data to this.
INITIAL_COMPRESSION_RATIO = 0.3
# Buffered pieces are merged into one batch once this many have arrived (see write()).
COMPACT_PIECES = 8
# Merged batches below this size are merged further (see _compact()).
SMALL_BATCH_BYTES = 128 * 1024
# What a buffered batch holds beyond its rows' Arrow bytes, per column: its C++ array and
# buffer objects and the allocators' smallest blocks. Measured in a worker: about 200
# bytes for a slice of a larger batch, 500-570 for a few rows with buffers of their own.
BATCH_OVERHEAD_BYTES_PER_COLUMN = 512


class CompressionEstimator:
    """Learns how much Parquet shrinks Arrow bytes, across the files of one task.

    Every flushed row group reports its Arrow size and the bytes it added on disk; the
    ratio of the totals turns buffered Arrow bytes into an on-disk estimate.
    """

    def __init__(self, initial_ratio: float = INITIAL_COMPRESSION_RATIO) -> None:
        self._arrow_bytes = 0
        self._disk_bytes = 0
        self._initial = initial_ratio
        self._lock = threading.Lock()  # files of a task may be closed by several threads

    @property
    def ratio(self) -> float:
        """Disk bytes per Arrow byte."""
        if self._arrow_bytes < 64 * 1024:
            return self._initial
        return max(self._disk_bytes / self._arrow_bytes, 1e-4)

    def observe(self, arrow_bytes: int, disk_bytes: int) -> None:
        """Record one flushed row group."""
        with self._lock:
            self._arrow_bytes += arrow_bytes
            self._disk_bytes += disk_bytes


class ParquetFileWriter(FileWriter[DataFileMessage | None]):
    """Writes one Parquet data file with Iceberg field ids and full column statistics.

    Rows are buffered until an estimated row group's worth (``row_group_size_bytes`` on
    disk) is held, then written as one row group. ``length_bytes()`` is what is on
    disk plus the estimated compressed size of the buffer.

    Args:
        io: FileIO that creates the file (local, S3, ... from the catalog's properties).
        path: Full URI of the file to create.
        schema: The Iceberg schema the file is written with.
        arrow_schema: ``schema`` as Arrow, with ``PARQUET:field_id`` metadata.
        partition: Partition values (Iceberg representation) of every row.
        spec_id: Partition spec id.
        row_group_size_bytes: Estimated on-disk size of one row group.
        estimator: Shared compression estimator of the task.
        compression: Parquet codec.
        table_properties: Table properties (column metrics modes).
        stats_plan: ``statistics_plan(schema, table_properties)``, when the caller has it.
        dictionary: Which columns to dictionary-encode, read when the file begins (every
            column without it).
        key_columns: The indexes of the table's key columns (upserts): their values are kept,
            in row order, for the file's message (:attr:`DataFileMessage.keys`).
    """

    def __init__(
        self,
        io: FileIO,
        path: str,
        schema: Schema,
        arrow_schema: pa.Schema,
        partition: tuple[Any, ...],
        spec_id: int,
        row_group_size_bytes: int,
        estimator: CompressionEstimator,
        compression: str,
        table_properties: dict[str, str],
        stats_plan: StatisticsPlan | None = None,
        dictionary: DictionaryColumns | None = None,
        key_columns: tuple[int, ...] = (),
    ) -> None:
        self.path = path
        self.partition = partition
        self._io = io
        self._schema = schema
        self._arrow_schema = arrow_schema
        self._spec_id = spec_id
        self._row_group_size_bytes = row_group_size_bytes
        self._estimator = estimator
        self._compression = compression
        self._table_properties = table_properties
        self._stats_plan = stats_plan
        self._dictionary = dictionary
        self._key_columns = list(key_columns)
        self._keys: list[pa.Table] = []  # each row group's key columns, in order
        self._buffer: list[pa.RecordBatch] = []  # compacted batches
        self._pieces: list[pa.RecordBatch] = []  # batches as written, not yet compacted
        self._buffer_bytes = 0
        self._batch_overhead = BATCH_OVERHEAD_BYTES_PER_COLUMN * len(arrow_schema)
        self._stream: OutputStream | None = None
        self._writer: pq.ParquetWriter | None = None
        self._nan_counts: dict[int, int] = {}
        self._float_columns = [
            (i, int(f.metadata[b"PARQUET:field_id"]))
            for i, f in enumerate(arrow_schema)
            if pa.types.is_floating(f.type) and f.metadata and b"PARQUET:field_id" in f.metadata
        ]
        self._closed = False
        self._result: DataFileMessage | None = None

    def write(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Buffer rows (``nbytes``: their Arrow size, if known); write a row group once enough is buffered."""
        if self._closed:
            raise RuntimeError(f"write after close of {self.path}")
        if batch.num_rows == 0:
            return
        self._pieces.append(batch)
        self._buffer_bytes += batch.nbytes if nbytes is None else nbytes
        if len(self._pieces) >= COMPACT_PIECES:
            self._compact()
        if self._buffer_bytes * self._estimator.ratio >= self._row_group_size_bytes:
            self.flush()

    def _compact(self) -> None:
        """Merge small buffered pieces into one batch with buffers of its own.

        A piece is usually a slice of a larger batch split by partition value; holding
        it keeps the whole parent batch alive, and thousands of tiny pieces cost more
        in objects than in data. Copying them together bounds both.
        """
        if not self._pieces:
            return
        self._buffer.append(pa.concat_batches(self._pieces) if len(self._pieces) > 1 else self._pieces[0])
        self._pieces = []
        # Small batches cost more in C++ and allocator overhead than in data: merge them
        # with their neighbour until each is over twice the size of the next, so a writer
        # fed tiny pieces holds O(log n) of them and copies each byte O(log n) times.
        # Batches of SMALL_BATCH_BYTES or more are never copied again.
        buffer = self._buffer
        while (
            len(buffer) > 1
            and buffer[-1].nbytes < SMALL_BATCH_BYTES
            and buffer[-2].nbytes <= 2 * buffer[-1].nbytes
        ):
            last = buffer.pop()
            buffer[-1] = pa.concat_batches([buffer[-1], last])

    def flush(self) -> None:
        """Write the buffered rows as one row group.

        The pieces not merged yet are written as they are: the writer reads each chunk of a
        column in turn, so merging them first would only copy every row once more.
        """
        batches = [*self._buffer, *self._pieces]
        if not batches:
            return
        if self._writer is None:
            self._stream = self._io.new_output(self.path).create(overwrite=False)
            failpoints.hit("storage.write")  # a storage write error, the file begun
            self._writer = pq.ParquetWriter(
                self._stream,
                schema=self._arrow_schema,
                compression=self._compression,
                use_dictionary=True if self._dictionary is None else self._dictionary.use_dictionary,
                store_decimal_as_integer=True,
                write_statistics=True,
            )
        assert self._stream is not None
        before = self._stream.tell()
        table = pa.Table.from_batches(batches, schema=self._arrow_schema)
        for index, field_id in self._float_columns:  # Parquet's footer has no NaN counts
            nans = pc.sum(pc.is_nan(table.column(index))).as_py() or 0
            if nans:
                self._nan_counts[field_id] = self._nan_counts.get(field_id, 0) + nans
        self._writer.write_table(table, row_group_size=table.num_rows)
        if self._key_columns:
            self._keys.append(table.select(self._key_columns))
        self._estimator.observe(self._buffer_bytes, self._stream.tell() - before)
        self._buffer = []
        self._pieces = []
        self._buffer_bytes = 0

    @property
    def row_group_size_bytes(self) -> int:
        """Estimated on-disk size at which buffered rows are written as a row group."""
        return self._row_group_size_bytes

    def length_bytes(self) -> int:
        """Bytes on disk plus the estimated compressed size of the buffer."""
        written = self._stream.tell() if self._stream is not None else 0
        return written + int(self._buffer_bytes * self._estimator.ratio)

    def buffered_bytes(self) -> int:
        """Memory the buffered rows hold: their Arrow bytes and a fixed cost per batch held.

        Rows of thousands of partition values arrive a few at a time; what their batches
        cost beyond the data then outweighs the data, and a budget counting only Arrow
        bytes would let a task's memory grow far past it.
        """
        return self._buffer_bytes + (len(self._pieces) + len(self._buffer)) * self._batch_overhead

    def close(self) -> None:
        """Write what is buffered, the footer, and compute the file's statistics."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        if self._writer is None or self._stream is None:
            return  # nothing was ever written: no file exists
        self._writer.close()
        self._stream.close()
        file_size = self._io.new_input(self.path).__len__()
        plan = self._stats_plan or statistics_plan(self._schema, self._table_properties)
        stats = footer_statistics(self._writer.writer.metadata, plan)
        stats["nan_value_counts"] = dict(self._nan_counts)
        self._result = DataFileMessage(
            path=self.path,
            partition=self.partition,
            spec_id=self._spec_id,
            file_size_bytes=file_size,
            record_count=stats["record_count"],
            column_sizes=stats["column_sizes"],
            value_counts=stats["value_counts"],
            null_value_counts=stats["null_value_counts"],
            nan_value_counts=stats["nan_value_counts"],
            lower_bounds=stats["lower_bounds"],
            upper_bounds=stats["upper_bounds"],
            split_offsets=tuple(stats["split_offsets"] or ()),
            keys=self._encoded_keys(),
        )

    def _encoded_keys(self) -> str:
        """The rows' key columns, in file order, without the file schema's field ids."""
        if not self._key_columns:
            return ""
        keys = pa.concat_tables(self._keys)
        self._keys = []
        return encode_keys(pa.table(keys.columns, names=keys.column_names))

    def result(self) -> DataFileMessage | None:
        """The file's message, or ``None`` when no row was written (no file exists)."""
        if not self._closed:
            raise RuntimeError(f"result() before close() of {self.path}")
        return self._result

    def abort(self) -> None:
        """Stop writing and delete whatever reached storage."""
        self._closed = True
        self._buffer = []
        self._pieces = []
        try:
            if self._writer is not None:
                self._writer.close()
            if self._stream is not None:
                self._stream.close()
        finally:
            if self._stream is not None:
                self._io.delete(self.path)
