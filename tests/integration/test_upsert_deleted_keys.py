"""The keys a one-table upsert batch deletes: found in the driver from the split's job, or, when the
write dropped bad rows, collected from the last changes; read back either way.

Each batch mixes, per key, a delete alone, a delete then an upsert, an upsert then a delete, a
delete with a greater order value than a later upsert, a delete of a key the table never had, and
(with ``bad``) a delete then an upsert whose value cannot be converted: that upsert is a dead
letter, so the key's last change is not applied and its row stays.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from icesink import IcebergSink
from tests.integration.test_upsert_sink import upsert_options
from tests.support.duckdb_reader import duckdb_read
from tests.support.tables import table_rows


def _schema(v: pa.DataType) -> pa.Schema:
    return pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("v", v), ("_op", pa.string()), ("seq", pa.int64())]
    )


def _batch(spark: Any, rows: list[tuple[Any, ...]], v: pa.DataType) -> Any:
    schema = _schema(v)
    return spark.createDataFrame(
        pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
    )


@pytest.mark.parametrize("bad", [False, True], ids=["deletes-in-the-driver", "bad-rows-deletes-collected"])
def test_each_key_gets_its_last_change(spark: Any, catalog_options: dict[str, str], bad: bool) -> None:
    sink = IcebergSink.from_options(
        upsert_options(catalog_options, **{"sink-id": "deleted-keys", "maintenance.enabled": "false"})
    )
    sink(_batch(spark, [(k, f"k{k}", k, "c", 0) for k in range(1, 9)], pa.int64()), 0)  # v: a long
    changes = [
        (1, None, None, "d", 1),  # deleted
        (2, None, None, "d", 1),
        (2, "k2-again", "20", "c", 2),  # deleted, then inserted again: the insert
        (3, "k3-new", "30", "u", 1),
        (3, None, None, "d", 2),  # updated, then deleted: deleted
        (4, None, None, "d", 5),
        (4, "k4-late", "40", "u", 3),  # arrives later but is older: the delete wins
        (5, None, None, "d", 1),
        (5, "k5-new", "x" if bad else "50", "u", 2),  # with ``bad``: a dead letter, the row stays
        (6, "k6-new", "60", "u", 1),
        (99, None, None, "d", 1),  # a key the table never had
    ]
    sink(_batch(spark, changes, pa.string()), 1)  # v as text, converted to the table's long
    table = sink.catalog.load_table("db.items")
    expected = {
        2: ("k2-again", 20),
        5: ("k5", 5) if bad else ("k5-new", 50),
        6: ("k6-new", 60),
        7: ("k7", 7),
        8: ("k8", 8),
    }
    assert {r["id"]: (r["name"], r["v"]) for r in table_rows(table)} == expected
    read = duckdb_read(table.metadata_location).to_pylist()
    assert {r["id"]: (r["name"], r["v"]) for r in read} == expected
    if bad:
        dead = table_rows(sink.catalog.load_table("db.items__dlq"))
        assert [r["value"] for r in dead] == ["x"]
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    # keys 1, 3, 4 and the old rows of 2 and 6 (and 5 unless bad) deleted: one delete file a partition at most
    deleted = int(snapshot.summary.additional_properties["added-position-deletes"])
    assert deleted == (5 if bad else 6)
    delete_files = [
        e.data_file
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.data_file.content.value == 1 and e.snapshot_id == snapshot.snapshot_id
    ]
    by_partition = [repr(f.partition) for f in delete_files]
    assert by_partition and len(by_partition) == len(set(by_partition))
    sink.close()
