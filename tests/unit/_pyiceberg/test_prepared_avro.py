"""icesink._pyiceberg.avro: the Avro files a commit writes are pyiceberg's, byte for byte but
the sync marker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import (
    UNASSIGNED_SEQ,
    ManifestContent,
    ManifestFile,
    PartitionFieldSummary,
    read_manifest_list,
    write_manifest_list,
)

from icesink._pyiceberg import avro

SYNC_SIZE = 16


def manifests(n: int, format_version: int) -> list[ManifestFile]:
    return [
        ManifestFile.from_args(
            manifest_path=f"file:///warehouse/db/t/metadata/m{i}.avro",
            manifest_length=4000 + i,
            partition_spec_id=0,
            content=ManifestContent.DELETES if i % 2 and format_version > 1 else ManifestContent.DATA,
            sequence_number=UNASSIGNED_SEQ if i == n - 1 else i,
            min_sequence_number=UNASSIGNED_SEQ if i == n - 1 else i,
            added_snapshot_id=77 if i == n - 1 else 70 + i,  # the last: added by this snapshot
            added_files_count=i,
            existing_files_count=1,
            deleted_files_count=0,
            added_rows_count=10 * i,
            existing_rows_count=5,
            deleted_rows_count=0,
            partitions=[PartitionFieldSummary(False, False, b"\x01\x00\x00\x00", b"\x09\x00\x00\x00")],
            key_metadata=None,
        )
        for i in range(n)
    ]


def write_list(path: Path, write: object, codec: str, format_version: int) -> Any:
    """The writer, once it wrote a list of five manifests to ``path``."""
    with write(  # type: ignore[operator]
        format_version=format_version,
        output_file=PyArrowFileIO().new_output(str(path)),
        snapshot_id=77,
        parent_snapshot_id=76,
        sequence_number=9,
        avro_compression=codec,
    ) as writer:
        writer.add_manifests(manifests(5, format_version))
    return writer


def written(path: Path, write: object, codec: str, format_version: int) -> bytes:
    write_list(path, write, codec, format_version)
    return path.read_bytes()


def without_sync(data: bytes) -> bytes:
    sync = data[-SYNC_SIZE:]  # every block ends with the file's marker
    return data.replace(sync, b"S" * SYNC_SIZE)


@pytest.mark.parametrize(("codec", "format_version"), [("gzip", 2), ("zstd", 2), ("null", 1), ("deflate", 2)])
def test_a_manifest_list_is_pyicebergs_but_for_its_sync_marker(
    tmp_path: Path, codec: str, format_version: int
) -> None:
    ours = [
        written(tmp_path / f"ours{n}.avro", avro.write_manifest_list, codec, format_version) for n in range(2)
    ]
    theirs = written(tmp_path / "theirs.avro", write_manifest_list, codec, format_version)
    assert ours[0][-SYNC_SIZE:] != ours[1][-SYNC_SIZE:]  # a marker of its own per file
    assert without_sync(ours[0]) == without_sync(theirs)
    assert without_sync(ours[1]) == without_sync(theirs)  # the second file, on the prepared writer


@pytest.mark.parametrize(("codec", "format_version"), [("gzip", 2), ("zstd", 2), ("null", 1), ("deflate", 1)])
def test_a_manifest_list_is_kept_as_written_and_read_as_pyiceberg_reads_it(
    tmp_path: Path, codec: str, format_version: int
) -> None:
    path = tmp_path / "list.avro"
    writer = write_list(path, avro.write_manifest_list, codec, format_version)
    assert writer.data == path.read_bytes()
    theirs = list(read_manifest_list(PyArrowFileIO().new_input(str(path))))
    for _ in range(2):  # the second read on the prepared reader
        assert avro.read_manifest_list(str(path), writer.data) == theirs
    assert [m.sequence_number for m in theirs][-1] == (9 if format_version == 2 else 0)
