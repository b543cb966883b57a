"""Manifests copied from the entries write tasks encoded: the same manifest, read back by every reader."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.avro.file import AvroFile
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestEntry, ManifestFile
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit.committer import Committer
from icesink.commit.encoded_manifests import split_encoded
from icesink.commit.ledger import BatchRange
from icesink.commit.staging import StagedBatch
from icesink.config import CommitConfig
from icesink.errors import CommitError
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.manifest_entry import (
    EntryEncoding,
    data_file_from_message,
    encoded_entry,
    manifest_codec,
    sync_marker,
)
from icesink.write.messages import DataFileMessage
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter
from tests.support.duckdb_reader import duckdb_read
from tests.support.tables import check_data_files

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(3, "x", DoubleType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(1, 1000, BucketTransform(4), "id_bucket"),
    PartitionField(2, 1001, IdentityTransform(), "kind"),
)
KINDS = ["a", "b", None]


@pytest.fixture()
def catalog(tmp_path: Path) -> Catalog:
    (tmp_path / "warehouse").mkdir()
    catalog = load_catalog(
        "enc", type="sql", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse"
    )
    catalog.create_namespace("db")
    return catalog


def new_table(catalog: Catalog, name: str, **properties: str) -> Table:
    return catalog.create_table(
        f"db.{name}",
        schema=SCHEMA,
        partition_spec=SPEC,
        properties={**CREATED_TABLE_PROPERTIES, **properties},
    )


def write(table: Table, prefix: str, ids: range, **table_properties: str) -> list[DataFileMessage]:
    """``ids`` written as one write task of the sink writes them (partition values computed in it)."""
    spec = WriteSpec(
        table=".".join(table.name()),
        schema=table.schema(),
        partition_spec=table.spec(),
        data_location=f"{table.location()}/data",
        io_properties=dict(table.io.properties),
        table_properties={**table.metadata.properties, **table_properties},
        file_prefix=prefix,
        target_file_size_bytes=1 << 20,
        row_group_size_bytes=1 << 20,
        memory_budget_bytes=64 << 20,
        compression="zstd",
        num_data_columns=3,
        partition_values_in_task=True,
    )
    rows = pa.RecordBatch.from_arrays(
        [
            pa.array(list(ids), pa.int64()),
            pa.array([KINDS[i % 3] for i in ids], pa.string()),
            pa.array([i / 7 if i % 5 else float("nan") for i in ids], pa.float64()),
        ],
        schema=iceberg_to_arrow_schema(table.schema()),
    )
    return DataTaskWriter(spec, 0, 0).write_all(iter([rows]))


def encoding(table: Table, prefix: str) -> EntryEncoding:
    return EntryEncoding(
        table.spec(), table.schema(), manifest_codec(table.metadata.properties), sync_marker(prefix)
    )


def commit(table: Table, *writes: list[DataFileMessage], first_batch: int = 0) -> None:
    """One commit of ``writes``, as the batches from ``first_batch`` on."""
    staged = [StagedBatch(first_batch + i, "a", tuple(files)) for i, files in enumerate(writes)]
    batches = BatchRange(first_batch, first_batch + len(writes) - 1)
    Committer(table, "enc", CommitConfig()).commit_batches(staged, batches)
    table.refresh()


def manifests(table: Table) -> list[ManifestFile]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return snapshot.manifests(table.io)


def entries(table: Table) -> list[ManifestEntry]:
    return [e for m in manifests(table) for e in m.fetch_manifest_entry(table.io, discard_deleted=False)]


def header(table: Table, manifest: ManifestFile) -> tuple[dict[str, str], bytes]:
    """A manifest's Avro metadata (the schema JSON left out) and its sync marker."""
    with AvroFile[ManifestEntry](table.io.new_input(manifest.manifest_path)) as avro:
        meta = {k: v for k, v in avro.header.meta.items() if k != "avro.schema"}
        return meta, avro.header.sync


def test_a_commit_copies_the_entries_its_write_task_encoded_into_the_manifest_pyiceberg_would_write(
    catalog: Catalog,
) -> None:
    copied, encoded_here = new_table(catalog, "copied"), new_table(catalog, "encoded_here")
    files = write(copied, "enc-b0-a0", range(3000))
    assert len(files) == 12 and all(f.entry_block for f in files)  # 4 buckets x 3 kinds
    commit(copied, files)
    assert not any(f.lower_bounds or f.value_counts or f.split_offsets for f in files)  # in the entries
    commit(encoded_here, [encoding(encoded_here, "enc-b0-a0").without_entry(f) for f in files])

    (manifest,) = manifests(copied)
    (reference,) = manifests(encoded_here)
    meta, sync = header(copied, manifest)
    assert sync == sync_marker("enc-b0-a0"), "the manifest was not the tasks' blocks"
    assert meta == header(encoded_here, reference)[0]
    for field in ("added_files_count", "added_rows_count", "partitions", "content", "partition_spec_id"):
        assert getattr(manifest, field) == getattr(reference, field), field
    assert manifest.sequence_number == reference.sequence_number == 1
    # The same blocks, but for the snapshot id each of pyiceberg's entries spells out.
    assert 0 <= reference.manifest_length - manifest.manifest_length <= 16 * len(files)

    ours, theirs = entries(copied), entries(encoded_here)
    assert [e.data_file for e in ours] == [e.data_file for e in theirs]
    snapshot_id = copied.current_snapshot().snapshot_id  # type: ignore[union-attr]
    # Written null, the snapshot id and sequence numbers are inherited from the manifest list.
    assert {(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in ours} == {
        (theirs[0].status, snapshot_id, 1, 1)
    }
    expected = sorted(range(3000))
    assert sorted(copied.scan().to_arrow().column("id").to_pylist()) == expected
    bucket_1 = copied.scan(row_filter="kind == 'b'").to_arrow()
    assert sorted(bucket_1.column("id").to_pylist()) == [i for i in expected if i % 3 == 1]
    duck = duckdb_read(copied.metadata_location, "SELECT id, kind FROM t")
    assert sorted(duck.column("id").to_pylist()) == expected
    assert check_data_files(copied) == 12  # the copied entries' statistics are the files' own


def test_each_write_of_a_commit_gets_its_own_copied_manifest_and_other_layouts_are_encoded_again(
    catalog: Catalog,
) -> None:
    table = new_table(catalog, "t")
    first, second = write(table, "enc-b0-a0", range(0, 600)), write(table, "enc-b1-a0", range(600, 1200))
    # Encoded with another codec than the table's: the driver encodes these entries itself.
    zstd = write(table, "enc-b2-a0", range(1200, 1500), **{"write.avro.compression-codec": "zstd"})
    commit(table, first, second, zstd)

    syncs = sorted(header(table, m)[1] for m in manifests(table))
    assert len(syncs) == 3
    assert sync_marker("enc-b0-a0") in syncs and sync_marker("enc-b1-a0") in syncs
    assert sync_marker("enc-b2-a0") not in syncs
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary["added-records"] == "1500"
    assert {e.snapshot_id for e in entries(table)} == {snapshot.snapshot_id}
    # The statistics of the entries the driver encoded came from their blocks.
    assert all(e.data_file.value_counts and e.data_file.lower_bounds for e in entries(table))
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(1500))
    assert duckdb_read(table.metadata_location, "SELECT count(*) AS n FROM t").column("n")[0].as_py() == 1500


def test_copied_manifests_are_merged_like_any_other(catalog: Catalog) -> None:
    table = new_table(catalog, "merged", **{"commit.manifest.min-count-to-merge": "3"})
    for b in range(5):
        commit(table, write(table, f"enc-b{b}-a0", range(b * 100, b * 100 + 100)), first_batch=b)
    assert len(manifests(table)) < 5
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(500))
    live = entries(table)
    assert len({e.data_file.file_path for e in live}) == len(live) == 5 * 12
    assert duckdb_read(table.metadata_location, "SELECT count(*) AS n FROM t").column("n")[0].as_py() == 500


def test_a_messages_data_file_is_what_pyicebergs_constructor_makes(catalog: Catalog) -> None:
    table = new_table(catalog, "t")
    for written in write(table, "enc-b0-a0", range(300)):
        message = encoding(table, "enc-b0-a0").without_entry(written)
        assert encoding(table, "enc-b0-a0").with_entry(message) == written
        built = data_file_from_message(message)
        expected = DataFile.from_args(
            content=DataFileContent.DATA,
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
            split_offsets=list(message.split_offsets),
        )
        fields = range(len(expected))
        assert [built[i] for i in fields] == [expected[i] for i in fields]
        assert built.spec_id == message.spec_id
        assert built.lower_bounds and built.partition == Record(*message.partition)


def test_an_entry_whose_schema_the_table_no_longer_has_fails_the_commit_naming_it(catalog: Catalog) -> None:
    table = new_table(catalog, "t")
    (file, *_) = write(table, "enc-b0-a0", range(10))
    lost = replace(file, entry_schema_id=7, entry_layout="another")
    entry = encoded_entry(lost)
    assert entry is not None
    with pytest.raises(CommitError, match="encoded with schema 7, which the table's metadata no longer has"):
        split_encoded([data_file_from_message(lost)], {lost.path: entry}, table.metadata, 0)
