"""Iceberg Java's maintenance WHILE icesink writes: conflicts retried, every row once, replays skipped.

A thread runs Java's procedures (``rewrite_data_files``, ``rewrite_position_delete_files``,
``expire_snapshots``, ``remove_orphan_files``) round after round through the run's Iceberg
Java reader, while the test's thread hands the sink batch after batch, as ``foreachBatch``
would. The batches go on until the snapshot log shows the two interleaved: a sink commit whose
parent is a snapshot Java made while the sink ran. Then the table is read back by pyiceberg,
DuckDB and Java: every row once (appends), the last change of every key (upserts), every file
the current snapshot references on storage, and a batch replayed after the maintenance skipped.

On the SQLite catalog one case runs in make test; the others, on PostgreSQL (a SQL catalog
shared by processes) and on SeaweedFS's REST catalog with S3, run in make test-interop.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icesink import IcebergSink
from tests.integration.test_upsert_sink import upsert_options
from tests.support.duckdb_reader import S3Settings, read_iceberg_with_duckdb
from tests.support.iceberg_java.maintenance import JavaMaintenance
from tests.support.iceberg_java.reader import IcebergJavaReader
from tests.support.tables import row_multiset, table_rows
from tests.support.upserts import BUCKETS, bucket_of, changes, expected_state, rows_of

pytestmark = pytest.mark.interop

MAX_BATCHES = 150
"""Batches at most until a sink commit lands on a snapshot of Java's and every procedure began.

Java's procedures take seconds each here and an append batch about one: the loop ends as
soon as both are seen (about 10 upsert batches, 40 of appends), this bound only on a failure.
"""
FAR_FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"
SUMMARY_SINK_ID = "icesink.sink-id"
KEYS = 30


def _catalog(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[dict[str, str], S3Settings | None]:
    """The sink's catalog options of ``kind`` (a namespace of the test's own), and DuckDB's S3 access."""
    namespace = f"ns_{uuid.uuid4().hex[:8]}"
    if kind == "sqlite":
        return {**request.getfixturevalue("catalog_options"), "namespace": namespace}, None
    if kind == "postgres":
        postgres = request.getfixturevalue("postgres")
        warehouse = tmp_path / "pg-warehouse"
        warehouse.mkdir()
        options = {
            "catalog.name": "pg",
            "catalog.type": "sql",
            "catalog.uri": postgres.sqlalchemy_uri(),
            "catalog.warehouse": f"file://{warehouse}",
        }
        return {**options, "namespace": namespace}, None
    seaweedfs = request.getfixturevalue("seaweedfs")
    properties = seaweedfs.rest_catalog_properties()
    options = {"catalog.name": "rest", **{f"catalog.{key}": value for key, value in properties.items()}}
    options["state-location"] = str(tmp_path / "state")  # a table bucket takes Iceberg's files only
    s3 = S3Settings(seaweedfs.s3_endpoint, seaweedfs.access_key, seaweedfs.secret_key)
    return {**options, "namespace": namespace}, s3


def _append_rows(batch_id: int) -> list[dict[str, Any]]:
    return [{"id": batch_id * 100 + k, "b": f"b{batch_id}", "k": k} for k in range(20)]


def _upsert_batch(batch_id: int) -> pa.Table:
    """Keys of one bucket of four (the next each batch) updated, one of them deleted, a new key inserted.

    One bucket a batch: Java's rewrite of the other buckets' files can commit meanwhile.
    """
    keys = [key for key in range(KEYS) if bucket_of(key) == batch_id % BUCKETS]
    rows: list[tuple[int | None, str | None, int | None, str | None, int | None]]
    rows = [(key, f"v{batch_id}.{key}", batch_id, "u", batch_id) for key in keys]
    rows += [(keys[batch_id % len(keys)], None, None, "d", batch_id)]
    rows += [(KEYS + batch_id, f"new{batch_id}", batch_id, "c", batch_id)]
    return changes(*rows)


def _plant_orphan(table: Table) -> Path:
    """A copy of a data file that no metadata references, dated four days back (Java's default age: three)."""
    folder = Path(table.location().removeprefix("file://"))
    orphan = folder / "data" / "orphan-copy.parquet"
    shutil.copy(next(folder.rglob("*.parquet")), orphan)
    four_days_ago = (dt.datetime.now(dt.UTC) - dt.timedelta(days=4)).timestamp()
    os.utime(orphan, (four_days_ago, four_days_ago))
    return orphan


def _sink_on_java_snapshot(table: Table, seen: dict[int, bool]) -> bool:
    """Whether a sink snapshot's parent is one of Java's; ``seen`` keeps whose each snapshot was."""
    for snapshot in table.snapshots():
        summary = snapshot.summary
        seen[snapshot.snapshot_id] = summary is not None and summary.get(SUMMARY_SINK_ID) is not None
    return any(
        seen.get(snapshot.snapshot_id)
        and snapshot.parent_snapshot_id in seen
        and not seen[snapshot.parent_snapshot_id]
        for snapshot in table.snapshots()
    )


def _check_files_exist(table: Table) -> int:
    """Every data and delete file the current snapshot references is on storage; how many there are."""
    paths = set()
    for task in table.scan().plan_files():
        paths.add(task.file.file_path)
        paths.update(delete.file_path for delete in task.delete_files)
    missing = sorted(path for path in paths if not table.io.new_input(path).exists())
    assert not missing, f"referenced but missing: {missing}"
    return len(paths)


def _run(
    spark: SparkSession,
    java: IcebergJavaReader,
    options: dict[str, str],
    calls: list[str],
    batch_of: Callable[[int], Any],
    *,
    orphan: bool,
) -> int:
    """Batches through one sink while Java maintains the table, until they interleave; the batches run.

    The batches stop once the snapshot log shows a sink commit on a snapshot of Java's, every
    procedure has begun while they ran and every rewrite has committed; the thread then finishes
    its current call (an expiry whose commits the batches kept refusing lands once they stop:
    Java retries it).
    """
    sink = IcebergSink.from_options(options)
    sink(batch_of(0), 0)
    planted = _plant_orphan(sink.catalog.load_table(options["table"])) if orphan else None
    maintenance = JavaMaintenance(java, options, calls)
    maintenance.start()
    seen: dict[int, bool] = {}
    batch_id, interleaved = 1, False
    try:
        while batch_id < MAX_BATCHES and not (interleaved and maintenance.all_began()):
            sink(batch_of(batch_id), batch_id)
            table = sink.catalog.load_table(options["table"])
            interleaved = _sink_on_java_snapshot(table, seen) or interleaved
            batch_id += 1
    finally:
        maintenance.stop()
    assert interleaved and maintenance.all_ran(), (
        f"no sink commit on a snapshot of Java's in {batch_id} batches, or not every procedure ran"
        f" ({maintenance.results}; refused: {maintenance.refused}; seconds: {maintenance.seconds})"
    )
    if planted is not None:
        assert not planted.exists()
    return batch_id


def _replay_after_maintenance(
    java: IcebergJavaReader, options: dict[str, str], calls: list[str], batch: Any, batch_id: int
) -> Table:
    """Java's rewrite and expiry once more, then the last batch replayed by a restarted sink: skipped.

    After them the last batch's snapshot is gone (a rewrite's is current): only the sink's marker,
    a table property that Java's commits carry over, says the batch is in.
    """
    catalog = options["catalog.name"]
    for call in calls:
        if call.startswith(("rewrite_data_files", "expire_snapshots")):
            java.sql(f"CALL {catalog}.system.{call}", options)
    restarted = IcebergSink.from_options(options)
    table = restarted.catalog.load_table(options["table"])
    summary = table.current_snapshot().summary  # type: ignore[union-attr]
    assert summary is not None and summary.get(SUMMARY_SINK_ID) is None  # Java's snapshot is current
    snapshots = len(table.snapshots())
    restarted(batch, batch_id)
    table = restarted.catalog.load_table(options["table"])
    assert len(table.snapshots()) == snapshots
    return table


def _calls(table: str, *, upsert: bool, orphans: bool) -> list[str]:
    """Java's procedures on ``table``: orphans first (one is planted), rewrites, expiry of all but the last.

    An upsert's rewrite commits file group by file group (``partial-progress.enabled``): a group
    whose files the stream deleted rows of meanwhile is refused alone, the others commit.
    """
    name = f"'{table}'"
    calls = [f"remove_orphan_files(table => {name})"] if orphans else []
    rewrite = "map('min-input-files', '2')"
    if upsert:
        calls.append(f"rewrite_position_delete_files(table => {name}, options => map('rewrite-all', 'true'))")
        rewrite = "map('rewrite-all', 'true', 'remove-dangling-deletes', 'true',"
        rewrite += " 'partial-progress.enabled', 'true')"
    calls.append(f"rewrite_data_files(table => {name}, options => {rewrite})")
    calls.append(f"expire_snapshots(table => {name}, older_than => {FAR_FUTURE}, retain_last => 1)")
    return calls


FULL = [pytest.mark.deploy, pytest.mark.interop_full]
CATALOGS = [pytest.param("postgres", marks=FULL), pytest.param("rest", marks=FULL)]
"""The catalogs of make test-interop, which runs every case: Java's procedures take minutes on 2
cores, so make test keeps the maintenance between batches (test_iceberg_java_maintenance.py)."""


@pytest.mark.parametrize("kind", [pytest.param("sqlite", marks=pytest.mark.interop_full), *CATALOGS])
def test_appends_go_on_while_java_maintains_the_table(
    kind: str,
    spark: SparkSession,
    iceberg_java: IcebergJavaReader,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    catalog, s3 = _catalog(kind, request, tmp_path)
    table_name = f"{catalog.pop('namespace')}.events"
    options = {**catalog, "table": table_name, "sink-id": "app", "partition-by": "bucket(2, id)"}
    options["maintenance.enabled"] = "false"  # Java's maintenance is under test, not the sink's
    local = kind != "rest"
    calls = _calls(table_name, upsert=False, orphans=local)

    def batch_of(batch_id: int) -> Any:
        return spark.createDataFrame(_append_rows(batch_id), "id long, b string, k int")

    batches = _run(spark, iceberg_java, options, calls, batch_of, orphan=local)
    table = _replay_after_maintenance(iceberg_java, options, calls, batch_of(batches - 1), batches - 1)
    expected = row_multiset([row for batch_id in range(batches) for row in _append_rows(batch_id)])
    assert row_multiset(table_rows(table)) == expected
    assert row_multiset(read_iceberg_with_duckdb(table.metadata_location, s3).to_pylist()) == expected
    java_rows = iceberg_java.sql(f"SELECT * FROM {options['catalog.name']}.{table_name}", options)
    assert row_multiset(java_rows.to_pylist()) == expected
    _check_files_exist(table)


@pytest.mark.parametrize("kind", [pytest.param("sqlite", marks=pytest.mark.interop_full), *CATALOGS])
def test_upserts_go_on_while_java_maintains_the_table(
    kind: str,
    spark: SparkSession,
    iceberg_java: IcebergJavaReader,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    catalog, s3 = _catalog(kind, request, tmp_path)
    table_name = f"{catalog.pop('namespace')}.items"
    options = upsert_options(catalog, **{"sink-id": "items", "table": table_name})
    options["maintenance.enabled"] = "false"  # Java's maintenance is under test, not the sink's
    local = kind != "rest"
    calls = _calls(table_name, upsert=True, orphans=local)
    state: dict[int, tuple[str | None, int | None]] = {}

    def batch_of(batch_id: int) -> Any:
        batch = _upsert_batch(batch_id)
        expected_state(state, batch)
        return spark.createDataFrame(batch)

    batches = _run(spark, iceberg_java, options, calls, batch_of, orphan=local)
    table = _replay_after_maintenance(
        iceberg_java, options, calls, spark.createDataFrame(_upsert_batch(batches - 1)), batches - 1
    )
    assert rows_of(table.scan().to_arrow()) == state  # no key twice, the last change of each
    assert rows_of(read_iceberg_with_duckdb(table.metadata_location, s3)) == state
    assert (
        rows_of(iceberg_java.sql(f"SELECT * FROM {options['catalog.name']}.{table_name}", options)) == state
    )
    _check_files_exist(table)
