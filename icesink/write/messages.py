"""The messages an executor sends to the driver: one per data file it wrote, one per task.

Small, frozen and picklable; they travel as one JSON string each in the Arrow output of
``mapInArrow`` (:data:`MESSAGE_SCHEMA`), so nothing of the executor's Python objects
crosses the wire. The driver turns a :class:`DataFileMessage` into a pyiceberg
``DataFile`` and sums the :class:`TaskReport` rows.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

from icesink.pause_gc import paused_gc

MESSAGE_COLUMN = "icesink_data_file"
MESSAGE_SCHEMA = pa.schema([pa.field(MESSAGE_COLUMN, pa.string(), nullable=False)])
MESSAGE_DDL = f"{MESSAGE_COLUMN} string not null"  # the same, for Spark

# Iceberg's content codes of a file (``DataFileContent``): what a message describes.
CONTENT_DATA = 0
CONTENT_POSITION_DELETES = 1


@dataclass(frozen=True)
class DataFileMessage:
    """One data file written by an executor, with everything the commit needs.

    Attributes:
        path: Full URI of the Parquet file.
        partition: Partition values in Iceberg's internal representation, spec order.
        spec_id: Partition spec the values belong to.
        record_count: Rows in the file.
        file_size_bytes: Size on storage.
        column_sizes: Field id -> compressed bytes.
        value_counts: Field id -> values (nulls included).
        null_value_counts: Field id -> nulls.
        nan_value_counts: Field id -> NaNs (float and double columns).
        lower_bounds: Field id -> Iceberg single-value serialization of the minimum.
        upper_bounds: Field id -> likewise for the maximum.
        split_offsets: Row group start offsets.
        task_id: Spark partition id of the writing task.
        open_writers_peak: Most writers the task had open at once.
        buffered_bytes_peak: Most bytes the task's writers buffered at once.
        task_peak_rss_bytes: Peak resident memory of the Python worker during the task.
        task_input_seconds: How long the task took to receive its rows (``TaskClock``).
        task_close_seconds: How long it took to finish its files after the last rows.
        content: :data:`CONTENT_DATA` for a data file, :data:`CONTENT_POSITION_DELETES` for a
            position delete file (its statistics are of the ``file_path`` and ``pos`` columns).
        table: The table the file belongs to, when one write job writes several (routed sinks).
        referenced_files: For a position delete file, the data files it deletes rows of
            (sorted); empty for a data file.
        entry_layout: The layout :attr:`entry_block` was encoded in; empty without one.
        entry_block: The file's manifest entry as one Avro block, encoded by the task
            (:mod:`icesink.write.manifest_entry`); empty when the driver encodes it. With
            one, the statistics and split offsets above are left empty: the entry has them.
        entry_schema_id: The table schema the entry's partition type came from.
        entry_codec: The entry's Avro codec (Iceberg's name).
        keys: The key columns of the file's rows in file order (a row's position is its
            number), as :func:`encode_keys` text: what an upsert's lookup looks up and its key
            index records, sent by the task that wrote them so that the driver neither
            collects them in a job of its own nor reads the file back. Empty unless the write
            was told the table's key columns (:attr:`~icesink.write.spec.WriteSpec.key_columns`).
    """

    path: str
    partition: tuple[Any, ...]
    spec_id: int
    record_count: int
    file_size_bytes: int
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)
    split_offsets: tuple[int, ...] = ()
    task_id: int = -1
    open_writers_peak: int = 0
    buffered_bytes_peak: int = 0
    task_peak_rss_bytes: int = 0
    task_input_seconds: float = 0.0
    task_close_seconds: float = 0.0
    content: int = CONTENT_DATA
    table: str = ""
    referenced_files: tuple[str, ...] = ()
    entry_layout: str = ""
    entry_block: bytes = b""
    entry_schema_id: int = -1
    entry_codec: str = ""
    keys: str = ""

    def key_rows(self) -> pa.Table | None:
        """:attr:`keys` decoded (``None`` when the file was written without them)."""
        return decode_keys(self.keys) if self.keys else None

    def to_json(self) -> str:
        """Encode for the wire (bytes as base64, decimals as strings, int keys as strings)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}  # asdict deep-copies
        data["partition"] = [_encode_value(v) for v in self.partition]
        for name in ("lower_bounds", "upper_bounds"):
            data[name] = {str(k): base64.b64encode(v).decode() for k, v in data[name].items()}
        for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
            data[name] = {str(k): v for k, v in data[name].items()}
        data["entry_block"] = base64.b64encode(self.entry_block).decode()
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DataFileMessage:
        """Decode what :meth:`to_json` produced."""
        data = json.loads(text)
        data["partition"] = tuple(_decode_value(v) for v in data["partition"])
        for name in ("lower_bounds", "upper_bounds"):
            data[name] = {int(k): base64.b64decode(v) for k, v in data[name].items()}
        for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
            data[name] = {int(k): v for k, v in data[name].items()}
        data["split_offsets"] = tuple(data["split_offsets"])
        data["referenced_files"] = tuple(data.get("referenced_files", ()))
        data["entry_block"] = base64.b64decode(data.get("entry_block", ""))
        return cls(**data)


@dataclass(frozen=True)
class RowCounts:
    """A batch's rows as its write received them, and how many of them were bad."""

    input_rows: int
    bad_rows: int

    @property
    def good_rows(self) -> int:
        return self.input_rows - self.bad_rows


@dataclass(frozen=True)
class TaskReport:
    """What one write task received: every row, whether it wrote it or dropped it as bad.

    Attributes:
        task_id: Spark partition id of the task.
        input_rows: Rows the task received.
        bad_rows: Of those, rows flagged bad (for the dead-letter table), not written.
        source_partitions: Spark partitions of the batch, before any shuffle, that its
            rows came from: at most two (two already say "more than one"); empty when the
            task was not told (``WriteSpec.source_partition_column``).
        input_row_bytes: The widest Arrow batch the task received from Spark, in bytes per
            row (:class:`~icesink.write.arrow_input.InputWidth`); 0 without rows.
    """

    task_id: int
    input_rows: int
    bad_rows: int
    source_partitions: tuple[int, ...] = ()
    input_row_bytes: int = 0

    def to_json(self) -> str:
        sources = list(self.source_partitions)
        report = [self.task_id, self.input_rows, self.bad_rows, sources, self.input_row_bytes]
        return json.dumps({_REPORT_KEY: report})


_REPORT_KEY = "task_report"


@dataclass(frozen=True)
class WriteResult:
    """What a write job sent back: its files, and the rows its tasks received and dropped.

    ``source_partitions`` is the union of the tasks' :attr:`TaskReport.source_partitions`:
    one id means every row of the batch came from that one Spark partition.
    ``input_row_bytes`` is the largest of their :attr:`TaskReport.input_row_bytes`.
    """

    files: list[DataFileMessage]
    counts: RowCounts
    source_partitions: frozenset[int] = frozenset()
    input_row_bytes: int = 0

    @classmethod
    def from_json(cls, texts: Iterable[str]) -> WriteResult:
        """Decode the messages of every task (:func:`messages_to_arrow`)."""
        files: list[DataFileMessage] = []
        input_rows = bad_rows = row_bytes = 0
        sources: set[int] = set()
        with paused_gc():
            for text in texts:
                if text.startswith('{"' + _REPORT_KEY):
                    _, received, bad, seen, width = json.loads(text)[_REPORT_KEY]
                    input_rows, bad_rows = input_rows + received, bad_rows + bad
                    sources.update(seen)
                    row_bytes = max(row_bytes, width)
                else:
                    files.append(DataFileMessage.from_json(text))
        return cls(files, RowCounts(input_rows, bad_rows), frozenset(sources), row_bytes)


def encode_keys(keys: pa.Table) -> str:
    """A key table as text: an Arrow IPC stream in base64."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, keys.schema) as writer:
        writer.write_table(keys)
    return base64.b64encode(sink.getvalue().to_pybytes()).decode()


def decode_keys(text: str) -> pa.Table:
    """What :func:`encode_keys` produced."""
    return pa.ipc.open_stream(base64.b64decode(text)).read_all()


def files_of(files: Iterable[DataFileMessage], table: str) -> list[DataFileMessage]:
    """The messages of ``files`` that name ``table`` (a routed or source write's files, by table)."""
    return [f for f in files if f.table == table]


def _encode_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return value


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "bytes" in value:
            return base64.b64decode(value["bytes"])
        if "decimal" in value:
            return Decimal(value["decimal"])
    return value


def messages_to_arrow(messages: list[DataFileMessage], report: TaskReport | None = None) -> pa.RecordBatch:
    """An Arrow batch a write task yields: one JSON message per file, then its report if given."""
    texts = [m.to_json() for m in messages] + ([report.to_json()] if report is not None else [])
    return pa.RecordBatch.from_arrays([string_array(texts)], schema=MESSAGE_SCHEMA)


def string_array(texts: list[str]) -> pa.Array:
    """``texts`` as an Arrow string array, built from its buffers.

    ``pa.array()`` of a Python list imports pandas the first time (it asks pandas whether
    the list is one of its arrays): over a quarter of a second in a new Spark worker, whose
    first task may have no rows and so no other use for pandas.
    """
    data = [text.encode() for text in texts]
    offsets = np.zeros(len(data) + 1, dtype="<i4")
    np.cumsum([len(d) for d in data], out=offsets[1:])
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data)))
