"""The snapshot producer on its own: appends through it, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.table.snapshots import Operation

from icesink._pyiceberg import commit_table_updates
from icesink.commit.snapshot import SnapshotProducer
from icesink.errors import UpsertError
from icesink.upsert.validate import conflicting_data_files
from icesink.write.manifest_entry import data_file_from_message
from icesink.write.messages import CONTENT_POSITION_DELETES
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import create_table, rows_of, sql_catalog, write_data_files


def _rows(ids: range) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], "v": pa.array(ids, pa.int64())}
    )


def test_appends_through_the_producer(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    for n, ids in enumerate((range(0, 10), range(10, 25))):
        producer = SnapshotProducer(table, Operation.APPEND, snapshot_properties={"k": str(n)})
        for message in write_data_files(table, _rows(ids), f"a{n}"):
            producer.add_file(data_file_from_message(message))
        pending = producer.build(table.metadata)
        commit_table_updates(table, pending.updates, pending.requirements)

    expected = {i: (f"n{i}", i) for i in range(25)}
    assert rows_of(table.scan().to_arrow()) == expected
    assert rows_of(duckdb_read(table.metadata_location)) == expected
    first, second = table.snapshots()
    assert second.parent_snapshot_id == first.snapshot_id
    assert (first.sequence_number, second.sequence_number) == (1, 2)
    assert second.summary is not None and second.summary.operation == Operation.APPEND
    assert (second.summary["added-records"], second.summary["total-records"], second.summary["k"]) == (
        "15",
        "25",
        "1",
    )
    # Appends are never conflicts for the deletes of a row delta.
    data_paths = {t.file.file_path for t in table.scan().plan_files()}
    assert conflicting_data_files(table.metadata, table.io, None, data_paths) == set()


def test_refusals(tmp_path: Path) -> None:
    table = create_table(sql_catalog(tmp_path))
    [message] = write_data_files(table, _rows(range(1)), "x")
    append = SnapshotProducer(table, Operation.APPEND)
    with pytest.raises(ValueError, match="data files only"):
        append.add_file(
            data_file_from_message(
                message.__class__(**{**message.__dict__, "content": CONTENT_POSITION_DELETES})
            )
        )
    with pytest.raises(ValueError, match="removes no file"):
        append.remove_path(message.path)
    replace = SnapshotProducer(table, Operation.REPLACE)
    replace.remove_path(message.path)
    with pytest.raises(UpsertError, match="no snapshot"):
        replace.build(table.metadata)

    append.add_file(data_file_from_message(message))
    pending = append.build(table.metadata)
    commit_table_updates(table, pending.updates, pending.requirements)
    gone = SnapshotProducer(table, Operation.REPLACE)
    gone.remove_path("file:///nowhere.parquet")
    with pytest.raises(UpsertError, match="not live in snapshot"):
        gone.build(table.metadata)
