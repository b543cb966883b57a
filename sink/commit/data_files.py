"""An executor's file message as the ``DataFile`` a manifest lists."""

from __future__ import annotations

from pyiceberg.manifest import DEFAULT_READ_VERSION, DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from sink.write.messages import DataFileMessage


def data_file_from_message(message: DataFileMessage) -> DataFile:
    """A pyiceberg ``DataFile`` (data or position deletes) from an executor's message.

    Whatever the table's format version, the entry has the fields of pyiceberg's read
    schema (format v2): its manifest writers take entries of that shape and write them in
    the table's format. An entry shaped as format v1 (no ``content`` field) is read a
    field off by a v1 manifest writer.
    """
    data_file = DataFile.from_args(
        _table_format_version=DEFAULT_READ_VERSION,
        content=DataFileContent(message.content),
        file_path=message.path,
        file_format=FileFormat.PARQUET,
        partition=Record(*message.partition),
        record_count=message.record_count,
        file_size_in_bytes=message.file_size_bytes,
        column_sizes=message.column_sizes,
        value_counts=message.value_counts,
        null_value_counts=message.null_value_counts,
        nan_value_counts=message.nan_value_counts,
        lower_bounds=message.lower_bounds,
        upper_bounds=message.upper_bounds,
        split_offsets=list(message.split_offsets) or None,
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
    )
    data_file.spec_id = message.spec_id  # not a field of the manifest's struct
    return data_file
