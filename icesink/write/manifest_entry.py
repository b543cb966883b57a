"""A written file's manifest entry: as pyiceberg's ``DataFile``, and encoded where it was written.

A commit of N files writes a manifest of N entries, and pyiceberg's Avro encoder is pure
Python: 16,384 entries cost the driver about a second per commit. A write task therefore
encodes the entries of the data files it wrote, each as one compressed Avro block (as
pyiceberg writes them: a block per entry) ending with the write's sync marker, and sends
it with the file's message. The driver's manifest is then the Avro header followed by
the blocks (:mod:`icesink.commit.encoded_manifests`).

An entry is encoded as Iceberg encodes the entries of a manifest written before its
commit: status added, snapshot id and sequence numbers null, which readers inherit from
the manifest's entry in the manifest list (format v2). Its bytes depend on the partition
type and the Avro codec (the entry's :attr:`EntryEncoding.layout`) and on the sync
marker; the driver copies a block only when its layout is the one the commit's base
metadata gives, and encodes the entry itself otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
from dataclasses import dataclass, replace

from pyiceberg.avro.codecs import CODEC_MAPPING_ICEBERG_TO_AVRO, KNOWN_CODECS
from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import SYNC_SIZE
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import resolve_reader, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DEFAULT_READ_VERSION,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.typedef import Record
from pyiceberg.types import StructType
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

from icesink.write.messages import CONTENT_DATA, DataFileMessage

ENCODED_FORMAT_VERSION = 2  # manifests of other format versions are encoded by the driver


def data_file_from_message(message: DataFileMessage) -> DataFile:
    """A pyiceberg ``DataFile`` (data or position deletes) from an executor's message.

    Whatever the table's format version, the entry has the fields of pyiceberg's read
    schema (format v2): its manifest writers take entries of that shape and write them in
    the table's format. An entry shaped as format v1 (no ``content`` field) is read a
    field off by a v1 manifest writer. Built from its values in the read schema's order
    (what ``DataFile.from_args`` does, at a third of its cost: a commit builds thousands).
    """
    values = {
        **_DEFAULTS,
        "content": _CONTENTS[message.content],
        "file_path": message.path,
        "file_format": FileFormat.PARQUET,
        "partition": Record(*message.partition),
        "record_count": message.record_count,
        "file_size_in_bytes": message.file_size_bytes,
        "column_sizes": message.column_sizes,
        "value_counts": message.value_counts,
        "null_value_counts": message.null_value_counts,
        "nan_value_counts": message.nan_value_counts,
        "lower_bounds": message.lower_bounds,
        "upper_bounds": message.upper_bounds,
        "split_offsets": list(message.split_offsets) or None,
    }
    data_file = DataFile(*[values[name] for name in _FIELDS])
    data_file.spec_id = message.spec_id  # not a field of the manifest's struct
    return data_file


_FIELDS = tuple(f.name for f in DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields)
_DEFAULTS = {f.name: f.initial_default for f in DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields}
_CONTENTS = {int(c): c for c in DataFileContent}


def manifest_codec(table_properties: dict[str, str]) -> str:
    """The table's Avro codec for manifests, by its Iceberg name (``gzip``, ``zstd``, ...)."""
    return table_properties.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )


def sync_marker(file_prefix: str) -> bytes:
    """The Avro sync marker of the entries a write encodes (``file_prefix`` is unique per write)."""
    return hashlib.sha256(file_prefix.encode()).digest()[:SYNC_SIZE]


@dataclass(frozen=True)
class EncodedEntry:
    """A data file's manifest entry as one Avro block, and how it was encoded.

    Attributes:
        layout: :attr:`EntryEncoding.layout` of the encoding.
        block: The block.
        schema_id: The id of the table schema the partition type came from.
        codec: The Avro codec, by its Iceberg name.
    """

    layout: str
    block: bytes
    schema_id: int
    codec: str

    @property
    def sync(self) -> bytes:
        """The sync marker the block ends with (the manifest's header must name the same)."""
        return self.block[-SYNC_SIZE:]


def encoded_entry(message: DataFileMessage) -> EncodedEntry | None:
    """The entry a write task encoded for ``message``'s file, if it did."""
    if not message.entry_block:
        return None
    return EncodedEntry(
        message.entry_layout, message.entry_block, message.entry_schema_id, message.entry_codec
    )


@dataclass(frozen=True)
class EntryEncoding:
    """How the manifest entries of one table's data files are encoded.

    Attributes:
        spec: The partition spec of the files.
        schema: The table schema the spec's partition type is computed from.
        codec: The table's Avro codec for manifests, by its Iceberg name.
        sync: The sync marker every block ends with.
    """

    spec: PartitionSpec
    schema: Schema
    codec: str
    sync: bytes

    @functools.cached_property
    def _types(self) -> _EntryTypes:
        return _entry_types(self.spec.partition_type(self.schema).model_dump_json())

    @property
    def file_schema(self) -> Schema:
        """The manifest's entry schema (format v2, with the spec's partition type)."""
        return self._types.file_schema

    @functools.cached_property
    def avro_codec(self) -> str:
        """The codec's Avro name (``deflate`` for Iceberg's ``gzip``)."""
        return CODEC_MAPPING_ICEBERG_TO_AVRO.get(self.codec, self.codec)

    @functools.cached_property
    def layout(self) -> str:
        """A digest of the entry's Avro schema and codec: blocks of one layout go in one manifest."""
        text = self._types.avro_schema_json + "\0" + self.avro_codec
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def block(self, data_file: DataFile) -> bytes:
        """``data_file``'s entry, added by a snapshot still to be named, as one Avro block."""
        entry = ManifestEntry.from_args(
            status=ManifestEntryStatus.ADDED,
            snapshot_id=None,
            sequence_number=None,
            file_sequence_number=None,
            data_file=data_file,
        )
        content = io.BytesIO()
        self._types.writer.write(BinaryEncoder(content), entry)
        data = content.getvalue()
        if codec := KNOWN_CODECS[self.avro_codec]:  # type: ignore[index]
            data, _ = codec.compress(data)
        block = io.BytesIO()
        encoder = BinaryEncoder(block)
        encoder.write_int(1)
        encoder.write_int(len(data))
        encoder.write(data)
        encoder.write(self.sync)
        return block.getvalue()

    def decode(self, block: bytes) -> DataFile:
        """The data file of an entry :meth:`block` encoded (its ``spec_id`` set)."""
        decoder = new_decoder(block)
        if decoder.read_int() != 1:
            raise ValueError("an encoded entry is a block of one entry")
        data = decoder.read_bytes()
        if codec := KNOWN_CODECS[self.avro_codec]:  # type: ignore[index]
            data = codec.decompress(data)
        entry = self._types.reader.read(new_decoder(data))
        data_file: DataFile = entry.data_file
        data_file.spec_id = self.spec.spec_id
        return data_file

    def without_entry(self, message: DataFileMessage) -> DataFileMessage:
        """``message`` as it was before :meth:`with_entry`, its statistics read from its block."""
        if not message.entry_block:
            return message
        data_file = self.decode(message.entry_block)
        return replace(
            message,
            column_sizes=data_file.column_sizes,
            value_counts=data_file.value_counts,
            null_value_counts=data_file.null_value_counts,
            nan_value_counts=data_file.nan_value_counts,
            lower_bounds=data_file.lower_bounds,
            upper_bounds=data_file.upper_bounds,
            split_offsets=tuple(data_file.split_offsets or ()),
            entry_layout="",
            entry_block=b"",
            entry_schema_id=-1,
            entry_codec="",
        )

    def with_entry(self, message: DataFileMessage) -> DataFileMessage:
        """``message`` with its file's encoded entry, and without what the entry holds.

        The statistics and split offsets are in the entry, and no other use of a data
        file's message needs them: left out, the message is a quarter of its size, in
        the task that holds it from its file's close until it is sent on, and in the
        driver that decodes them all. A delete file's message is left as it is (its entry is the driver's).
        """
        if message.content != CONTENT_DATA:
            return message
        return replace(
            message,
            column_sizes={},
            value_counts={},
            null_value_counts={},
            nan_value_counts={},
            lower_bounds={},
            upper_bounds={},
            split_offsets=(),
            entry_layout=self.layout,
            entry_block=self.block(data_file_from_message(message)),
            entry_schema_id=self.schema.schema_id,
            entry_codec=self.codec,
        )


class _EntryTypes:
    """The entry schemas of one partition type, and the Avro writer and reader between them.

    Building them walks the schemas many times over (a few milliseconds); they depend on
    the partition type only, which the tables of a routed write mostly share.
    """

    def __init__(self, partition_type: StructType) -> None:
        self.file_schema = _entry_schema(partition_type, ENCODED_FORMAT_VERSION)
        self.record_schema = _entry_schema(partition_type, DEFAULT_READ_VERSION)  # pyiceberg's objects

    @functools.cached_property
    def avro_schema_json(self) -> str:
        avro = AvroSchemaConversion().iceberg_to_avro(self.file_schema, schema_name="manifest_entry")
        return json.dumps(avro, sort_keys=True)

    @functools.cached_property
    def writer(self) -> Writer:
        return resolve_writer(record_schema=self.record_schema, file_schema=self.file_schema)

    @functools.cached_property
    def reader(self) -> Reader:
        return resolve_reader(
            self.file_schema,
            self.record_schema,
            read_types={-1: ManifestEntry, 2: DataFile},
            read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
        )


@functools.lru_cache(maxsize=256)
def _entry_types(partition_type_json: str) -> _EntryTypes:
    """The :class:`_EntryTypes` of a partition type, by its JSON (equal types of two loads hash apart)."""
    return _EntryTypes(StructType.model_validate_json(partition_type_json))


def _entry_schema(partition_type: StructType, format_version: int) -> Schema:
    data_file = data_file_with_partition(partition_type, format_version)  # type: ignore[arg-type]
    return manifest_entry_schema_with_data_file(format_version, data_file)  # type: ignore[arg-type]
