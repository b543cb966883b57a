"""Expiring snapshots and removing orphans keeps the table readable and the replay check intact."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pyspark.sql import SparkSession

from icesink import IcebergSink
from icesink.maintenance import expire_snapshots, referenced_files, remove_orphan_files


def _files_under(folder: Path) -> set[str]:
    return {f"file://{p}" for p in folder.rglob("*") if p.is_file()}


def test_expire_deletes_only_what_expired_snapshots_alone_reached(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path
) -> None:
    # The sink's own maintenance off: the snapshots are the six batches' alone.
    options = {**catalog_options, "table": "db.maint", "sink-id": "m", "maintenance.enabled": "false"}
    sink = IcebergSink.from_options(options)
    for batch_id in range(6):
        sink(spark.range(batch_id * 100, batch_id * 100 + 100), batch_id)
    table = sink.catalog.load_table("db.maint")
    report = expire_snapshots(table, retain_last=2)
    assert report.expired_snapshots == 4
    assert report.deleted_files and all(".avro" in p for p in report.deleted_files)  # appends: no data file
    table = sink.catalog.load_table("db.maint")
    assert len(table.snapshots()) == 2
    assert sorted(table.scan().to_arrow().column("id").to_pylist()) == list(range(600))
    for path in report.deleted_files:
        assert not Path(path.removeprefix("file://")).exists()
    assert referenced_files(table) <= _files_under(warehouse)
    sink(spark.range(0, 100), 0)  # replay of a batch whose snapshot is gone: still skipped
    assert sink.catalog.load_table("db.maint").scan().to_arrow().num_rows == 600


def test_remove_orphan_files_respects_age(
    spark: SparkSession, catalog_options: dict[str, str], warehouse: Path
) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.orphans", "sink-id": "o"})
    sink(spark.range(0, 100), 0)
    table = sink.catalog.load_table("db.orphans")
    stray = warehouse / "db" / "orphans" / "data" / "stray.parquet"
    stray.write_bytes(b"not referenced")
    assert remove_orphan_files(table).deleted_files == ()  # too young: could be a batch in flight
    report = remove_orphan_files(table, older_than=dt.timedelta(0))
    assert report.deleted_files == (f"file://{stray}",)
    assert not stray.exists()
    assert sink.catalog.load_table("db.orphans").scan().to_arrow().num_rows == 100
