"""Iceberg Java's maintenance between icesink's batches: the stream goes on, every row once, replays skipped.

Users run Iceberg's Spark procedures (``CALL <catalog>.system.rewrite_data_files``,
``rewrite_position_delete_files``, ``expire_snapshots``, ``remove_orphan_files``) on the
tables icesink writes. Here they run through the one Iceberg Java reader of the run, on the
test's SQLite catalog, between two of the sink's batches.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.integration.test_upsert_sink import upsert_options
from tests.support.iceberg_java.reader import IcebergJavaReader
from tests.support.tables import row_multiset, table_rows
from tests.support.upserts import CHANGE_BATCHES, changes, expected_state, rows_of

pytestmark = pytest.mark.interop

FAR_FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"
"""``older_than`` of ``expire_snapshots``: every snapshot but the last."""


def _maintain(java: IcebergJavaReader, options: dict[str, str], table: str, *calls: str) -> None:
    for call in calls:
        java.sql("CALL test.system." + call.format(table=f"'{table}'"), options)


EXPIRE = f"expire_snapshots(table => {{table}}, older_than => {FAR_FUTURE}, retain_last => 1)"


def _remove_orphans(java: IcebergJavaReader, options: dict[str, str], table: str, location: str) -> None:
    """Java's ``remove_orphan_files`` over every file of the table, with one planted orphan it must remove.

    The procedure refuses an ``older_than`` less than a day ago, so every file of the table
    is dated two days back first: then only what no metadata references may go, and that
    is exactly the planted copy of a data file (icesink and Java's procedures leave nothing).
    """
    folder = Path(location.removeprefix("file://"))
    orphan = folder / "data" / "orphan-copy.parquet"
    shutil.copy(next(folder.rglob("*.parquet")), orphan)
    two_days_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=2)).timestamp()
    for path in folder.rglob("*"):
        os.utime(path, (two_days_ago, two_days_ago))
    older_than = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=25)).strftime("%Y-%m-%d %H:%M:%S")
    removed = java.sql(
        f"CALL test.system.remove_orphan_files(table => '{table}', older_than => TIMESTAMP '{older_than}')",
        options,
    )
    assert [Path(p.removeprefix("file:")).resolve() for p in removed.column(0).to_pylist()] == [orphan]
    assert not orphan.exists()


# Three change batches (inserts; updates, deletes, new keys; re-inserts and several changes
# of one key), then every other key updated and every fifth deleted: changes of rows that
# Java's rewrites moved to other files and positions.
UPSERT_BATCHES = [
    *CHANGE_BATCHES[:3],
    changes(
        *[(i, f"w{i}", -i, "u", 8) for i in range(0, 50, 2)],
        *[(i, None, None, "d", 8) for i in range(1, 50, 5)],
    ),
]


def _rows(batch_id: int) -> list[dict[str, Any]]:
    return [{"id": batch_id * 100 + k, "b": f"b{batch_id}", "k": k} for k in range(40)]


def _batch(spark: SparkSession, batch_id: int) -> Any:
    return spark.createDataFrame(_rows(batch_id), "id long, b string, k int")


def test_appends_go_on_after_javas_maintenance_and_replays_stay_skipped(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader
) -> None:
    options = {**catalog_options, "table": "db.events", "sink-id": "app", "partition-by": "bucket(2, id)"}
    sink = IcebergSink.from_options(options)
    for batch_id in (0, 1):
        sink(_batch(spark, batch_id), batch_id)
    rewrite = "rewrite_data_files(table => {table}, options => map('min-input-files', '2'))"
    _maintain(iceberg_java, options, "db.events", rewrite, EXPIRE)
    table = sink.catalog.load_table("db.events")
    _remove_orphans(iceberg_java, options, "db.events", table.location())
    current = table.current_snapshot()
    assert len(table.snapshots()) == 1 and current is not None and current.summary is not None
    assert current.summary.operation.value == "replace"

    # Spark replays the last batch after a restart: its snapshot expired, Java's is the only
    # one left, and the table's marker alone says it is in.
    restarted = IcebergSink.from_options(options)
    restarted(_batch(spark, 1), 1)
    restarted(_batch(spark, 2), 2)
    restarted(_batch(spark, 2), 2)
    expected = [row for batch_id in (0, 1, 2) for row in _rows(batch_id)]
    ours = table_rows(sink.catalog.load_table("db.events"))
    assert row_multiset(ours) == row_multiset(expected)
    java = iceberg_java.sql("SELECT * FROM test.db.events", options).to_pylist()
    assert row_multiset(java) == row_multiset(expected)


def test_upserts_go_on_after_javas_maintenance_with_the_last_change_of_every_key(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader
) -> None:
    options = upsert_options(catalog_options, **{"sink-id": "items"})
    sink = IcebergSink.from_options(options)
    state: dict[int, tuple[str | None, int | None]] = {}

    def apply(upserts: IcebergSink, batch_id: int) -> None:
        batch: pa.Table = UPSERT_BATCHES[batch_id]
        upserts(spark.createDataFrame(batch), batch_id)
        expected_state(state, batch)

    for batch_id in (0, 1):
        apply(sink, batch_id)
    assert iceberg_java.sql("SELECT * FROM test.db.items.delete_files", options).num_rows > 0
    _maintain(
        iceberg_java,
        options,
        "db.items",
        "rewrite_position_delete_files(table => {table}, options => map('rewrite-all', 'true'))",
        EXPIRE,
    )
    apply(sink, 2)
    options_map = "map('rewrite-all', 'true', 'remove-dangling-deletes', 'true')"
    rewrite = f"rewrite_data_files(table => {{table}}, options => {options_map})"
    _maintain(iceberg_java, options, "db.items", rewrite, EXPIRE)
    _remove_orphans(iceberg_java, options, "db.items", sink.catalog.load_table("db.items").location())
    assert iceberg_java.sql("SELECT * FROM test.db.items.delete_files", options).num_rows == 0

    snapshots = len(sink.catalog.load_table("db.items").snapshots())
    restarted = IcebergSink.from_options(options)
    restarted(spark.createDataFrame(UPSERT_BATCHES[2]), 2)  # replayed after its snapshot expired: skipped
    assert len(sink.catalog.load_table("db.items").snapshots()) == snapshots
    apply(restarted, 3)
    assert rows_of(iceberg_java.sql("SELECT * FROM test.db.items", options)) == state  # no key twice
    assert rows_of(sink.catalog.load_table("db.items").scan().to_arrow()) == state
