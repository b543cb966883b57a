"""The upsert key index's file format: Puffin files of icesink's own blob type, one blob per partition.

An upserted table's key index maps every live key of a partition to the data file and row
position holding it, so an upsert's lookup reads the index instead of the key columns of
every data file of the partitions it touches (:mod:`icesink.upsert.key_index_view`).

It is stored with the table, in Puffin files (Iceberg's format for statistics: the magic
``PFA1``, the blobs, a JSON footer, its length, flags, the magic again) in the table's
``metadata/`` folder, each registered as the statistics file of the snapshot it
describes. Readers that do not know the blob type ignore it ("statistics are
informational"), and Iceberg Java's orphan removal keeps every file the table metadata
names. The registration lists no blob metadata (an empty ``blob-metadata``): pyiceberg
0.12 refuses to load table metadata naming a blob type it does not know, and an empty
list also keeps cost-based optimizers from reading the blobs as sketches. The footer of
the file names the blobs.

A blob (type ``icesink-key-index-v1``) is a Parquet file of one partition's entries:
the key columns, ``file`` (the ordinal of the data file in the list kept in the Parquet
file's key-value metadata, null for a key that was deleted) and ``pos``, sorted by key.
A blob is either ``full`` (every live key of the partition) or a ``delta`` (only the keys
changed since the links before it). A partition's index is a chain of blobs, the first
full, each in some Puffin file; the footer of a snapshot's Puffin file names the chain of
every partition (:data:`CHAINS_PROPERTY`), so one footer tells where the whole index is,
and a snapshot's file holds blobs only for the partitions that changed.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io import FileIO

from icesink.write.messages import _decode_value, _encode_value

BLOB_TYPE = "icesink-key-index-v1"
FORMAT_VERSION = "1"
MAGIC = b"PFA1"
FILE_PREFIX = "icesink-key-index-"
CHAINS_PROPERTY = "icesink.key-index.chains"
KEYS_PROPERTY = "icesink.key-index.key-columns"
VERSION_PROPERTY = "icesink.key-index.format-version"
_FILES_METADATA = b"icesink.files"

Partition = tuple[int, tuple[Any, ...]]
"""A partition of the table: its spec id and values (Iceberg representation)."""


class IndexFormatError(ValueError):
    """A key index file that cannot be read: missing, corrupt, or of a format this version does not know."""


@dataclass(frozen=True)
class BlobRef:
    """Where one blob of a partition's chain lives: its Puffin file, offset and length."""

    path: str
    offset: int
    length: int

    def to_list(self) -> list[Any]:
        return [self.path, self.offset, self.length]


@dataclass(frozen=True)
class IndexFooter:
    """What a key index file's footer says: the key columns and every partition's chain."""

    key_columns: tuple[str, ...]
    chains: dict[Partition, tuple[BlobRef, ...]]


def is_index_path(path: str) -> bool:
    """Whether a statistics file is a key index file (by its name)."""
    return path.rsplit("/", 1)[-1].startswith(FILE_PREFIX)


def encode_blob(
    entries: pa.Table, key_columns: Sequence[str], in_order: bool = False
) -> tuple[bytes, pa.Table]:
    """A partition's entries (key columns, ``file_path`` (null: deleted), ``pos``) as a blob, by key;
    and the entries as :func:`decode_blob` reads them back (sorted, ``file_path`` dictionary-encoded).

    ``file_path`` may come dictionary-encoded (a link read back, a whole partition): it is
    never cast to strings, only its dictionary cut to the files still named. ``in_order``:
    the entries are sorted by key already (a full blob merged in order), not sorted again.
    """
    paths = entries.column("file_path").combine_chunks()
    if not pa.types.is_dictionary(paths.type):
        paths = paths.cast(pa.string()).dictionary_encode()
    ordinals, files = _used_files(paths)
    positions = entries.column("pos").cast(pa.int64())
    keys = [entries.column(name) for name in key_columns]
    if not in_order:
        order = pc.sort_indices(entries.select(list(key_columns)), [(n, "ascending") for n in key_columns])
        keys = [key.take(order) for key in keys]
        ordinals, positions = ordinals.take(order), positions.take(order)
    table = pa.table([*keys, ordinals, positions], names=[*key_columns, "file", "pos"])
    table = table.replace_schema_metadata({_FILES_METADATA: json.dumps(files.to_pylist()).encode()})
    sink = io.BytesIO()
    integers = [n for n in key_columns if table.schema.field(n).type in (pa.int32(), pa.int64())]
    # Sorted integer keys and positions delta-encoded, file ordinals dictionary-encoded: all
    # bit-packed, which zstd hardly shrinks further but doubles the time of a full blob's write
    # (benchmarks/LOG.md, 2026-12-03). Other key columns (strings) stay zstd-compressed.
    packed = [*integers, "file", "pos"]
    pq.write_table(
        table,
        sink,
        compression={n: "none" if n in packed else "zstd" for n in table.column_names},
        use_dictionary=["file"],
        column_encoding=dict.fromkeys([*integers, "pos"], "DELTA_BINARY_PACKED"),
        write_statistics=False,
    )
    decoded = pa.table(
        [*keys, pa.DictionaryArray.from_arrays(ordinals, files), positions],
        names=[*key_columns, "file_path", "pos"],
    )
    return sink.getvalue(), decoded


def _used_files(paths: pa.DictionaryArray) -> tuple[pa.Array, pa.Array]:
    """The ordinals of ``paths`` (int32, null: deleted) into a dictionary of only the files they name."""
    indices = paths.indices.cast(pa.int32())
    used = np.zeros(len(paths.dictionary), dtype=bool)
    used[indices.drop_null().to_numpy()] = True
    renumbered = pa.array(np.cumsum(used, dtype=np.int32) - 1)
    return pc.take(renumbered, indices), paths.dictionary.cast(pa.string()).filter(pa.array(used))


def decode_blob(payload: bytes, key_columns: Sequence[str]) -> pa.Table:
    """A blob's entries: the key columns, ``file_path`` (dictionary-encoded; null: deleted) and ``pos``."""
    try:
        table = pq.read_table(io.BytesIO(payload))
        files = json.loads((table.schema.metadata or {})[_FILES_METADATA])
        ordinals = table.column("file").combine_chunks()
        paths = pa.DictionaryArray.from_arrays(ordinals, pa.array(files, pa.string()))
        return pa.table(
            [*(table.column(name) for name in key_columns), paths, table.column("pos")],
            names=[*key_columns, "file_path", "pos"],
        )
    except (pa.ArrowException, OSError, KeyError, ValueError, TypeError) as e:
        raise IndexFormatError(f"unreadable key index blob: {type(e).__name__}: {e}") from e


def write_index_file(
    file_io: FileIO,
    path: str,
    blobs: Sequence[bytes],
    key_columns: Sequence[str],
    chains: dict[Partition, list[BlobRef | int]],
) -> tuple[int, int]:
    """Write a Puffin file of ``blobs``; ``chains`` name its own blobs by number. Its size and footer size."""
    offset = len(MAGIC)
    own: list[BlobRef] = []
    for payload in blobs:
        own.append(BlobRef(path, offset, len(payload)))
        offset += len(payload)
    resolved = {p: [own[link] if isinstance(link, int) else link for link in c] for p, c in chains.items()}
    footer = {
        "blobs": [
            {"type": BLOB_TYPE, "fields": [], "snapshot-id": -1, "sequence-number": -1}
            | {"offset": ref.offset, "length": ref.length}
            for ref in own
        ],
        "properties": {
            VERSION_PROPERTY: FORMAT_VERSION,
            KEYS_PROPERTY: json.dumps(list(key_columns)),
            CHAINS_PROPERTY: json.dumps(
                [
                    [spec_id, [_encode_value(v) for v in values], [ref.to_list() for ref in chain]]
                    for (spec_id, values), chain in resolved.items()
                ],
                separators=(",", ":"),
            ),
        },
    }
    payload = json.dumps(footer, separators=(",", ":")).encode()
    tail = MAGIC + payload + struct.pack("<i", len(payload)) + b"\x00\x00\x00\x00" + MAGIC
    with file_io.new_output(path).create(overwrite=True) as out:
        out.write(MAGIC)
        for blob in blobs:
            out.write(blob)
        out.write(tail)
    return offset + len(tail), len(tail)


def read_footer(file_io: FileIO, path: str, file_size: int) -> IndexFooter:
    """The footer of a key index file.

    Raises:
        IndexFormatError: The file is missing, not a Puffin file, or not a key index of a known version.
    """
    try:
        with file_io.new_input(path).open() as stream:
            stream.seek(file_size - 12)
            tail = stream.read(12)
            length = struct.unpack("<i", tail[:4])[0]
            if tail[-4:] != MAGIC or length <= 0 or length > file_size:
                raise IndexFormatError(f"{path} is not a Puffin file")
            stream.seek(file_size - 12 - length)
            footer = json.loads(stream.read(length))
        properties = footer["properties"]
        if properties.get(VERSION_PROPERTY) != FORMAT_VERSION:
            raise IndexFormatError(f"{path} is key index format {properties.get(VERSION_PROPERTY)!r}")
        chains = {
            (int(spec_id), tuple(_decode_value(v) for v in values)): tuple(BlobRef(*ref) for ref in chain)
            for spec_id, values, chain in json.loads(properties[CHAINS_PROPERTY])
        }
        return IndexFooter(tuple(json.loads(properties[KEYS_PROPERTY])), chains)
    except IndexFormatError:
        raise
    except (OSError, ValueError, KeyError, TypeError, struct.error) as e:
        raise IndexFormatError(f"key index file {path} unreadable: {type(e).__name__}: {e}") from e


def read_blob(file_io: FileIO, ref: BlobRef, key_columns: Sequence[str]) -> pa.Table:
    """One blob's entries (only its bytes are read)."""
    try:
        with file_io.new_input(ref.path).open() as stream:
            stream.seek(ref.offset)
            payload = stream.read(ref.length)
    except OSError as e:
        raise IndexFormatError(f"key index file {ref.path} unreadable: {type(e).__name__}: {e}") from e
    if len(payload) != ref.length:
        raise IndexFormatError(f"key index file {ref.path} is shorter than its footer says")
    return decode_blob(payload, key_columns)
