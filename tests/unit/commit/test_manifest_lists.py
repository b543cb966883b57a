"""icesink.commit.manifest_lists: a commit builds on the list it wrote, which is what a reader reads back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table

from icesink._pyiceberg.avro import read_manifest_list
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.commit import manifest_lists
from icesink.commit.committer import Committer
from icesink.commit.ledger import BatchRange
from tests.unit.commit_fixtures import (
    FAST_RETRIES,
    SINK_ID,
    make_table,
    sink_config,
    sound_ids,
    write_attempt,
)


@pytest.fixture(autouse=True)
def fresh_lists() -> Iterator[None]:
    manifest_lists.forget_all()
    yield
    manifest_lists.forget_all()


@pytest.fixture()
def catalog_and_table(tmp_path: Path) -> tuple[Catalog, Table]:
    return make_table(sink_config(tmp_path))


def commit_batch(table: Table, batch_id: int) -> None:
    staged = write_attempt(table, batch_id, f"a{batch_id}", range(batch_id * 10, batch_id * 10 + 10))
    Committer(table, SINK_ID, FAST_RETRIES).commit(list(staged.files), BatchRange(batch_id, batch_id), {})


def remembered(table: Table) -> list[ManifestFile] | None:
    """The manifests of the list remembered for ``table``, if it is its current snapshot's (else ``None``)."""
    snapshot = table.current_snapshot()
    assert snapshot is not None
    kept = manifest_lists._lists.get(str(table.metadata.table_uuid))
    if kept is None or kept[0] != snapshot.manifest_list:
        return None
    with table.io.new_input(snapshot.manifest_list).open() as stream:
        assert kept[1] == stream.read()  # the bytes written, as written
    return read_manifest_list(*kept)


def test_each_commit_remembers_the_manifests_a_reader_reads_back_from_its_list(
    catalog_and_table: tuple[Catalog, Table],
) -> None:
    _, table = catalog_and_table
    table.transaction().set_properties({"commit.manifest.min-count-to-merge": "3"}).commit_transaction()
    for batch_id in range(7):  # merges every third commit
        commit_batch(table, batch_id)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        kept = remembered(table)
        assert kept is not None, f"batch {batch_id}: the list just written is not remembered"
        read = list(snapshot.manifests(table.io))
        assert kept == read  # pyiceberg's reader and the prepared one agree
        added = [m for m in read if m.added_snapshot_id == snapshot.snapshot_id]
        assert {m.sequence_number for m in added} == {snapshot.sequence_number}
    assert len(read) < 7  # merged
    assert sound_ids(table) == list(range(70))


def test_a_commit_on_another_writers_snapshot_reads_that_snapshots_list(
    catalog_and_table: tuple[Catalog, Table],
) -> None:
    _, table = catalog_and_table
    commit_batch(table, 0)
    table.append(pa.table({"id": pa.array([1000], pa.int64()), "v": pa.array(["other"])}))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert remembered(table) is None
    assert manifest_lists.manifests_of(table.metadata, snapshot, table.io) == snapshot.manifests(table.io)
    commit_batch(table, 1)
    assert sound_ids(table) == [*range(10), *range(10, 20), 1000]


def test_a_format_v1_list_is_remembered_as_written(catalog_and_table: tuple[Catalog, Table]) -> None:
    catalog, _ = catalog_and_table
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    properties = {**CREATED_TABLE_PROPERTIES, "format-version": "1"}
    v1 = catalog.create_table("db.v1", schema=schema, properties=properties)
    commit_batch(v1, 0)
    commit_batch(v1, 1)
    snapshot = v1.current_snapshot()
    assert snapshot is not None
    assert remembered(v1) == list(snapshot.manifests(v1.io))
    assert sorted(v1.scan().to_arrow().column("id").to_pylist()) == list(range(20))


def test_the_lists_remembered_hold_a_bounded_number_of_bytes(
    catalog_and_table: tuple[Catalog, Table], monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog, first = catalog_and_table
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    tables = [first, *(catalog.create_table(f"db.t{n}", schema=schema) for n in range(3))]
    for table in tables:  # a list of 1 manifest each
        commit_batch(table, 0)
    count, size = manifest_lists.held()
    assert count == 4 and size > 0
    monkeypatch.setattr(manifest_lists, "MAX_BYTES", size)
    commit_batch(first, 1)  # the first table's list grows by a manifest: the oldest other table goes
    assert manifest_lists.held()[0] == 3
    assert manifest_lists.held()[1] <= size
    assert remembered(tables[1]) is None and remembered(tables[2]) is not None
    assert remembered(first) is not None
    commit_batch(tables[1], 1)  # forgotten: read back from its list, and committed all the same
    assert sound_ids(tables[1]) == list(range(20))
