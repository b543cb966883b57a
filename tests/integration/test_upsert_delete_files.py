"""Position delete files per partition per lookup task: one file for many data files of a partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from pyiceberg.manifest import DataFileContent
from pyiceberg.table import Table

from icesink.upsert.batch import UpsertOutcome
from icesink.upsert.lookup import run_lookup
from tests.support.duckdb_reader import duckdb_read
from tests.support.upserts import UpsertDriver, bucket_of, changes, create_table, rows_of, sql_catalog

LOADS = 4  # insert batches: each writes one data file per bucket


def _loaded(tmp_path: Path, driver_for: Any = None) -> tuple[Table, UpsertDriver]:
    table = create_table(sql_catalog(tmp_path))
    driver = UpsertDriver(table) if driver_for is None else driver_for(table)
    for start in range(0, LOADS * 100, 100):
        driver.apply(changes(*[(i, f"n{i}", i, "c", 0) for i in range(start, start + 100)]))
    return table, driver


def _update_buckets(driver: UpsertDriver, buckets: set[int]) -> tuple[UpsertOutcome, list[int]]:
    """Update two keys of each insert batch in ``buckets``: every data file of those buckets is hit."""
    keys = [
        k
        for start in range(0, LOADS * 100, 100)
        for b in sorted(buckets)
        for k in [k for k in range(start, start + 100) if bucket_of(k) == b][:2]
    ]
    return driver.apply(changes(*[(k, f"u{k}", -k, "u", 1) for k in keys])), keys


def _delete_files(table: Table) -> list[Any]:
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [
        e.data_file
        for m in snapshot.manifests(table.io)
        for e in m.fetch_manifest_entry(table.io)
        if e.data_file.content == DataFileContent.POSITION_DELETES
    ]


def _expected(keys: list[int]) -> dict[int, tuple[str | None, int | None]]:
    state: dict[int, tuple[str | None, int | None]] = {i: (f"n{i}", i) for i in range(LOADS * 100)}
    state.update({k: (f"u{k}", -k) for k in keys})
    return state


def test_one_delete_file_for_every_data_file_of_a_partition_in_one_task(tmp_path: Path) -> None:
    table, driver = _loaded(tmp_path)
    outcome, keys = _update_buckets(driver, {2})  # the local runner: all lookup tasks in one task

    table.refresh()
    assert outcome.report.files_read == LOADS  # K data files of bucket 2 hit...
    assert outcome.delete_files == 1  # ...one delete file, not K
    [delete_file] = _delete_files(table)
    assert delete_file.partition[0] == 2 and delete_file.record_count == len(keys)
    rows = pq.read_table(delete_file.file_path.removeprefix("file://"))
    paths, positions = rows.column("file_path").to_pylist(), rows.column("pos").to_pylist()
    assert len(set(paths)) == LOADS
    assert list(zip(paths, positions, strict=True)) == sorted(zip(paths, positions, strict=True))
    assert rows.schema.field("file_path").metadata[b"PARQUET:field_id"] == b"2147483546"
    assert delete_file.lower_bounds[2147483546].decode() == paths[0]  # full paths, not truncated
    assert delete_file.upper_bounds[2147483546].decode() == paths[-1]
    assert rows_of(table.scan().to_arrow()) == _expected(keys)
    assert rows_of(duckdb_read(table.metadata_location)) == _expected(keys)


def test_spark_lookup_tasks_get_whole_partitions(tmp_path: Path, spark: Any) -> None:
    def on_spark(table: Table) -> UpsertDriver:
        return UpsertDriver(table, run_lookup=lambda t, s: run_lookup(spark, t, s, parallelism=2))

    table, driver = _loaded(tmp_path, on_spark)
    outcome, keys = _update_buckets(driver, {0, 3})  # 2 x K files, two Spark tasks

    table.refresh()
    assert outcome.report.files_read == 2 * LOADS
    assert outcome.delete_files == 2  # one per partition
    assert sorted(f.partition[0] for f in _delete_files(table)) == [0, 3]
    assert rows_of(table.scan().to_arrow()) == _expected(keys)
    assert rows_of(duckdb_read(table.metadata_location)) == _expected(keys)
