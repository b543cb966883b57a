"""pyiceberg's Avro files with their per-schema work done once: record writer and reader, header schema.

``AvroOutputFile`` resolves its writer tree and converts its schema to Avro JSON for
every file it writes. A commit writes a manifest and a manifest list of the same schemas
as the commit before, and those two steps cost more than encoding the entries (about a
third of a one-file commit). :class:`PreparedAvroOutputFile` writes the same bytes with
both kept per schema; :func:`write_manifest_list` is pyiceberg's, on that file, and keeps
the bytes it wrote. :func:`read_manifest_list` reads a list's bytes the way pyiceberg
does, with the reader for the header's schema resolved once instead of once per list
(two thirds of reading a list of ten manifests).
"""

from __future__ import annotations

import functools
import io
import json
import os
import threading
from types import TracebackType
from typing import Any, NamedTuple

from pyiceberg.avro.codecs import AVRO_CODEC_KEY, CODEC_MAPPING_ICEBERG_TO_AVRO
from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.file import (
    _SCHEMA_KEY,
    MAGIC,
    META_SCHEMA,
    SYNC_SIZE,
    AvroFile,
    AvroFileHeader,
    AvroOutputFile,
)
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import construct_writer, resolve_reader, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import InputFile, InputStream, OutputFile
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_LIST_FILE_SCHEMAS,
    ManifestContent,
    ManifestFile,
    ManifestListWriter,
    PartitionFieldSummary,
)
from pyiceberg.manifest import write_manifest_list as pyiceberg_write_manifest_list
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

_MAX_PREPARED = 256


class _Prepared(NamedTuple):
    file_schema: Schema  # held, so that its id is not reused while this entry lives
    record_schema: Schema | None
    writer: Writer
    avro_schema: str


_prepared: dict[tuple[int, int, str], _Prepared] = {}
_lock = threading.Lock()
_header_writer = construct_writer(META_SCHEMA)


def _prepare(file_schema: Schema, record_schema: Schema | None, schema_name: str) -> _Prepared:
    key = (id(file_schema), id(record_schema), schema_name)
    with _lock:
        prepared = _prepared.get(key)
    if prepared is not None:
        return prepared
    writer = (
        construct_writer(file_schema=file_schema)
        if record_schema is None
        else resolve_writer(record_schema=record_schema, file_schema=file_schema)
    )
    avro_schema = json.dumps(AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name=schema_name))
    prepared = _Prepared(file_schema, record_schema, writer, avro_schema)
    with _lock:
        if len(_prepared) >= _MAX_PREPARED:
            _prepared.clear()
        _prepared[key] = prepared
    return prepared


class PreparedAvroOutputFile(AvroOutputFile[Any]):
    """``AvroOutputFile`` whose writer and header schema are built once per schema object.

    The schemas must not change after their first file (pyiceberg's schemas are frozen).
    """

    def __init__(
        self,
        output_file: OutputFile,
        file_schema: Schema,
        schema_name: str,
        record_schema: Schema | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        prepared = _prepare(file_schema, record_schema, schema_name)
        self.output_file = output_file
        self.file_schema = file_schema
        self.schema_name = schema_name
        self.sync_bytes = os.urandom(SYNC_SIZE)
        self.writer = prepared.writer
        self.metadata = dict(metadata or {})
        self._avro_schema = prepared.avro_schema

    def _write_header(self) -> None:
        codec = self.metadata.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
        codec = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec, codec)
        meta = {**self.metadata, _SCHEMA_KEY: self._avro_schema, AVRO_CODEC_KEY: codec}
        _header_writer.write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


class _KeptAvroOutputFile(PreparedAvroOutputFile):
    """A :class:`PreparedAvroOutputFile` encoded in memory, written in one call and kept as :attr:`data`."""

    data: bytes = b""

    def __enter__(self) -> _KeptAvroOutputFile:
        self.output_stream = io.BytesIO()
        self.encoder = BinaryEncoder(self.output_stream)
        self._write_header()
        return self

    def __exit__(
        self, exctype: type[BaseException] | None, excinst: BaseException | None, exctb: TracebackType | None
    ) -> None:
        if exctype is not None:
            return
        data = self.output_stream.getvalue()  # type: ignore[attr-defined]
        with self.output_file.create(overwrite=True) as out:
            out.write(data)
        self.data = data


def write_manifest_list(
    format_version: int,
    output_file: OutputFile,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int | None,
    avro_compression: str,
) -> _PreparedListWriter:
    """pyiceberg's manifest list writer, writing through a prepared Avro file and keeping its bytes."""
    writer = pyiceberg_write_manifest_list(
        format_version=format_version,  # type: ignore[arg-type]
        output_file=output_file,
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent_snapshot_id,
        sequence_number=sequence_number,
        avro_compression=avro_compression,  # type: ignore[arg-type]
    )
    return _PreparedListWriter(writer)


class _PreparedListWriter(ManifestListWriter):
    """A manifest list writer whose Avro file is prepared, and kept as :attr:`data` once written."""

    def __init__(self, inner: ManifestListWriter) -> None:
        self._inner = inner
        super().__init__(inner._format_version, inner._output_file, inner._meta)

    def __enter__(self) -> _PreparedListWriter:
        self._writer = _KeptAvroOutputFile(
            output_file=self._output_file,
            record_schema=MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION],
            file_schema=MANIFEST_LIST_FILE_SCHEMAS[self._format_version],
            schema_name="manifest_file",
            metadata=self._meta,
        )
        self._writer.__enter__()
        return self

    def prepare_manifest(self, manifest_file: ManifestFile) -> ManifestFile:
        return self._inner.prepare_manifest(manifest_file)

    @property
    def data(self) -> bytes:
        """The list's bytes, once written."""
        assert isinstance(self._writer, _KeptAvroOutputFile)
        return self._writer.data


class _BytesInput(InputFile):
    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._data)


@functools.lru_cache(maxsize=16)
def _list_reader(avro_schema: str) -> tuple[Schema, Reader]:
    file_schema = AvroSchemaConversion().avro_to_iceberg(json.loads(avro_schema))
    reader = resolve_reader(
        file_schema,
        MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION],
        {-1: ManifestFile, 508: PartitionFieldSummary},
        {517: ManifestContent},
    )
    return file_schema, reader


class _PreparedListFile(AvroFile[ManifestFile]):
    """pyiceberg's reading of a manifest list, with the reader of its header's schema resolved once."""

    def __enter__(self) -> _PreparedListFile:
        with self.input_file.open() as stream:
            self.decoder = new_decoder(stream.read())
        self.header = self._read_header()
        self.schema, self.reader = _list_reader(self.header.meta[_SCHEMA_KEY])
        self.read_schema = MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION]
        return self


def read_manifest_list(location: str, data: bytes) -> list[ManifestFile]:
    """The manifests of the list ``data`` (the bytes of the file at ``location``), as pyiceberg reads them."""
    with _PreparedListFile(_BytesInput(location, data)) as manifests:
        return list(manifests)
