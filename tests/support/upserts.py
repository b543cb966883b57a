"""A small upserted table and the per-batch flow of the upsert building blocks, for tests.

The table: ``id long`` (required, the key), ``name string``, ``v long``, partitioned by
``bucket(4, id)``, format v2. A batch of changes (``id``, ``name``, ``v``, ``_op``,
``seq``) goes through the same steps as the sink's: last change per key, data files of
the new row versions written by the sink's write task, lookup of the changed keys, one
row delta commit.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType, NestedField, StringType

from icesink.config import CommitConfig
from icesink.upsert.batch import LookupRunner, UpsertApplier, UpsertOutcome
from icesink.upsert.changes import change_set
from icesink.upsert.key_index_update import KeyIndexStore
from icesink.upsert.lookup import LookupSpec, run_lookup_locally
from icesink.write.messages import DataFileMessage
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "v", LongType(), required=False),
    identifier_field_ids=[1],
)
BUCKETS = 4
State = dict[int, tuple[str | None, int | None]]  # each live key's (name, v)
SPEC = PartitionSpec(
    PartitionField(source_id=1, field_id=1000, transform=BucketTransform(BUCKETS), name="id_bucket")
)
CHANGE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("v", pa.int64()),
        pa.field("_op", pa.string()),
        pa.field("seq", pa.int64()),
    ]
)


def bucket_of(key: int) -> int:
    """The bucket of ``key`` in the tables of :func:`create_table`."""
    bucket = BucketTransform(BUCKETS).transform(LongType())(key)
    assert bucket is not None
    return int(bucket)


def sql_catalog(tmp_path: Any) -> Catalog:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir(exist_ok=True)
    catalog = load_catalog(
        "test", type="sql", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{warehouse}"
    )
    catalog.create_namespace_if_not_exists("db")
    return catalog


def create_table(
    catalog: Catalog,
    name: str = "db.items",
    format_version: int = 2,
    properties: dict[str, str] | None = None,
) -> Table:
    return catalog.create_table(
        name,
        schema=SCHEMA,
        partition_spec=SPEC,
        properties={"format-version": str(format_version), **(properties or {})},
    )


def changes(*rows: tuple[int | None, str | None, int | None, str | None, int | None]) -> pa.Table:
    """A change batch from ``(id, name, v, op, seq)`` tuples."""
    return pa.Table.from_pylist([dict(zip(CHANGE_SCHEMA.names, r, strict=True)) for r in rows], CHANGE_SCHEMA)


CHANGE_BATCHES = [
    # inserts
    changes(*[(i, f"n{i}", i, "c", 0) for i in range(40)]),
    # updates, deletes, new keys
    changes(
        *[(i, f"u{i}", i * 10, "u", 1) for i in range(0, 40, 3)],
        *[(i, None, None, "d", 1) for i in range(1, 40, 7)],
        *[(i, f"n{i}", i, "c", 1) for i in range(40, 50)],
    ),
    # re-insert of deleted keys; several changes of one key, out of order by seq
    changes(
        (1, "back", 1, "c", 2),
        (8, "back", 8, "r", 2),
        (5, "first", 1, "u", 3),
        (5, "third", 3, "u", 5),
        (5, None, None, "d", 4),
        (6, "x", 1, "u", 2),
        (6, None, None, "d", 2),  # same seq: the later row wins
        (45, None, None, "d", 2),
        (99, None, None, "d", 2),  # a delete of a key that never existed
    ),
    # an update of a key updated in the previous batch, and a delete then re-insert in one batch
    changes((5, "fourth", 4, "u", 6), (0, None, None, "d", 6), (0, "again", 0, "c", 7)),
]
"""A sequence of four change batches, in order, every change valid (batch ids 0 to 3)."""


def write_data_files(table: Table, rows: pa.Table, prefix: str) -> list[DataFileMessage]:
    """Write ``rows`` (the table's columns) with the sink's write task, in this process."""
    if rows.num_rows == 0:
        return []
    writer = DataTaskWriter(write_spec(table, prefix), task_id=0, attempt=0)
    return writer.write_all(iter(rows.select(table.schema().column_names).to_batches()))


def write_spec(table: Table, prefix: str) -> WriteSpec:
    """What the sink's write tasks need for the table's data files (partition values computed in the task)."""
    return WriteSpec(
        table=".".join(table.name()),
        schema=table.schema(),
        partition_spec=table.spec(),
        data_location=f"{table.location()}/data",
        io_properties=dict(table.io.properties),
        table_properties=dict(table.metadata.properties),
        file_prefix=prefix,
        target_file_size_bytes=64 * 1024 * 1024,
        row_group_size_bytes=8 * 1024 * 1024,
        memory_budget_bytes=64 * 1024 * 1024,
        compression="zstd",
        num_data_columns=len(table.schema().fields),
        partition_values_in_task=True,
    )


class UpsertDriver:
    """Applies change batches to a table as the sink would, one batch id after the other."""

    def __init__(
        self,
        table: Table,
        run_lookup: LookupRunner = run_lookup_locally,
        sink_id: str = "s1",
        index: KeyIndexStore | None = None,
    ) -> None:
        self.applier = UpsertApplier(
            table,
            ["id"],
            sink_id,
            CommitConfig(retries=2, min_wait_ms=1, max_wait_ms=5),
            LookupSpec(".".join(table.name()), dict(table.io.properties), "upsert"),
            run_lookup,
            index=index,
        )
        self._sink_id = sink_id
        self._batch_ids = itertools.count()
        self.before_commit: Callable[[], None] | None = None

    def apply(self, batch: pa.Table) -> UpsertOutcome:
        batch_id = next(self._batch_ids)
        change = change_set(batch, ["id"], "_op", "seq")
        data = write_data_files(self.applier.table, change.rows, f"{self._sink_id}-b{batch_id}")
        if self.before_commit is not None:
            self.before_commit()
        return self.applier.apply(change.keys, data, batch_id, attempt=f"{self._sink_id}-b{batch_id}a0")


def expected_state(state: State, batch: pa.Table) -> None:
    """Apply ``batch`` to a plain dict model of the table (last change per key by seq, then order)."""
    last: dict[int, dict[str, Any]] = {}
    for position, row in enumerate(batch.to_pylist()):
        current = last.get(row["id"])
        if current is None or (row["seq"], position) >= (current["seq"], current["_pos"]):
            last[row["id"]] = {**row, "_pos": position}
    for key, row in last.items():
        if row["_op"] == "d":
            state.pop(key, None)
        else:
            state[key] = (row["name"], row["v"])


def rows_of(table: pa.Table) -> State:
    """Rows as ``{id: (name, v)}``; fails on a duplicate key."""
    result: State = {}
    for row in table.select(["id", "name", "v"]).to_pylist():
        assert row["id"] not in result, f"duplicate key {row['id']}"
        result[row["id"]] = (row["name"], row["v"])
    return result
