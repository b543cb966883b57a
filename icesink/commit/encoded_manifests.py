"""Manifests of added data files whose entries the write tasks encoded.

The blocks of entries the tasks encoded (:mod:`icesink.write.manifest_entry`) are copied
after an Avro header naming their schema, codec and sync marker, which makes the same
manifest pyiceberg's writer would: the same Avro schema and metadata, a block per
entry. The driver's work is then a copy, whatever the number of files: the rows and
partitions of the manifest's summary are counted from the ``DataFile`` objects, which
the snapshot's summary needs anyway.

A block is used only when it was encoded in the layout the commit's base metadata gives
(its partition type and codec: a schema or spec that changed in between gives another)
and the table is of format version 2. The others are encoded here as before
(:class:`~icesink.commit.snapshot.SnapshotProducer`), from the data file their block holds:
a message with a block has no statistics of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic_core import to_json
from pyiceberg.avro.codecs import AVRO_CODEC_KEY
from pyiceberg.io import OutputFile
from pyiceberg.manifest import (
    UNASSIGNED_SEQ,
    DataFile,
    ManifestContent,
    ManifestFile,
    construct_partition_summaries,
)
from pyiceberg.table.metadata import TableMetadata

from icesink._pyiceberg.avro import PreparedAvroOutputFile
from icesink.errors import CommitError
from icesink.write.manifest_entry import (
    ENCODED_FORMAT_VERSION,
    EncodedEntry,
    EntryEncoding,
    manifest_codec,
)


@dataclass(frozen=True)
class EncodedGroup:
    """Data files of one partition spec whose entries were encoded alike, with their blocks."""

    sync: bytes
    files: list[DataFile]
    blocks: list[bytes]


def split_encoded(
    files: Sequence[DataFile], encoded: Mapping[str, EncodedEntry], base: TableMetadata, spec_id: int
) -> tuple[list[EncodedGroup], list[DataFile]]:
    """``files`` (of ``spec_id``) as groups to copy, one per sync marker, and the files to encode.

    ``encoded`` maps a file's path to the entry its task encoded.
    """
    if not encoded:
        return [], list(files)
    layout = _encoding(base, spec_id, b"").layout if base.format_version == ENCODED_FORMAT_VERSION else None
    groups: dict[bytes, EncodedGroup] = {}
    decoders: dict[tuple[int, str], EntryEncoding] = {}  # by schema id and codec
    rest = []
    for data_file in files:
        entry = encoded.get(data_file.file_path)
        if entry is None:
            rest.append(data_file)
            continue
        if entry.layout != layout:
            key = (entry.schema_id, entry.codec)
            decoder = decoders.get(key) or decoders.setdefault(key, _decoder(base, spec_id, entry))
            if decoder.layout != entry.layout:
                raise CommitError(
                    f"a data file's manifest entry has layout {entry.layout}, "
                    f"not {decoder.layout} of schema {entry.schema_id} and codec {entry.codec}",
                    hint="this is a bug in icesink; please report it with the table's metadata",
                )
            rest.append(decoder.decode(entry.block))
            continue
        group = groups.setdefault(entry.sync, EncodedGroup(entry.sync, [], []))
        group.files.append(data_file)
        group.blocks.append(entry.block)
    return list(groups.values()), rest


def write_encoded_manifest(
    output: OutputFile, base: TableMetadata, spec_id: int, snapshot_id: int, group: EncodedGroup
) -> ManifestFile:
    """The manifest of ``group``'s added files: the Avro header, then the blocks as encoded."""
    encoding = _encoding(base, spec_id, group.sync)
    avro = PreparedAvroOutputFile(
        output_file=output,
        file_schema=encoding.file_schema,
        schema_name="manifest_entry",
        metadata=_metadata(encoding),
    )
    avro.sync_bytes = encoding.sync  # the header names the marker the blocks end with
    with avro:
        avro.encoder.write(b"".join(group.blocks))
    return ManifestFile.from_args(
        manifest_path=output.location,
        manifest_length=len(output),
        partition_spec_id=spec_id,
        content=ManifestContent.DATA,
        sequence_number=UNASSIGNED_SEQ,
        min_sequence_number=UNASSIGNED_SEQ,
        added_snapshot_id=snapshot_id,
        added_files_count=len(group.files),
        existing_files_count=0,
        deleted_files_count=0,
        added_rows_count=sum(f.record_count for f in group.files),
        existing_rows_count=0,
        deleted_rows_count=0,
        partitions=construct_partition_summaries(
            encoding.spec, encoding.schema, [f.partition for f in group.files]
        ),
        key_metadata=None,
    )


def _decoder(base: TableMetadata, spec_id: int, entry: EncodedEntry) -> EntryEncoding:
    """The encoding ``entry`` was made with (its schema and codec), to read it back."""
    schema = next((s for s in base.schemas if s.schema_id == entry.schema_id), None)
    if schema is None:
        raise CommitError(
            f"a data file's manifest entry was encoded with schema {entry.schema_id}, "
            "which the table's metadata no longer has",
            hint="keep a table's schemas while a write that used them is still to be committed",
        )
    return EntryEncoding(base.specs()[spec_id], schema, entry.codec, b"")  # decoding needs no sync


def _encoding(base: TableMetadata, spec_id: int, sync: bytes) -> EntryEncoding:
    return EntryEncoding(base.specs()[spec_id], base.schema(), manifest_codec(base.properties), sync)


def _metadata(encoding: EntryEncoding) -> dict[str, str]:
    """The Avro metadata of a format v2 data manifest, as pyiceberg's writer sets it."""
    return {
        "schema": encoding.schema.model_dump_json(),
        "partition-spec": to_json(encoding.spec.fields).decode("utf-8"),
        "partition-spec-id": str(encoding.spec.spec_id),
        "format-version": str(ENCODED_FORMAT_VERSION),
        AVRO_CODEC_KEY: encoding.codec,
        "content": "data",
    }
