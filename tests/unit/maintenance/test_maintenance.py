"""Snapshot expiry deletes exactly the files that only the expired snapshots reached."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from icesink.maintenance import expire_snapshots, referenced_files


def test_expire_deletes_exactly_what_only_the_expired_snapshots_reached(tmp_path: Path) -> None:
    catalog = SqlCatalog(
        "t", uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=f"file://{tmp_path / 'warehouse'}"
    )
    catalog.create_namespace("db")
    rows = pa.table({"id": pa.array([], pa.int64())})
    # Appends merge manifests: a file of an expired snapshot's manifest is still live in a merged one.
    merging = {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}
    table = catalog.create_table("db.t", schema=rows.schema, properties=merging)
    for start in range(0, 300, 100):
        table.append(pa.table({"id": pa.array(range(start, start + 100), pa.int64())}))
    table.overwrite(pa.table({"id": pa.array(range(1000, 1050), pa.int64())}))  # the appended files replaced
    table.append(pa.table({"id": pa.array(range(2000, 2010), pa.int64())}))
    everything = referenced_files(table)
    data_before = {p for p in everything if p.endswith(".parquet")}

    report = expire_snapshots(table, retain_last=1)

    table = catalog.load_table("db.t")
    kept = referenced_files(table)
    assert sorted(report.deleted_files) == sorted(everything - kept)
    deleted_data = {p for p in report.deleted_files if p.endswith(".parquet")}
    assert len(deleted_data) == 3  # the three overwritten files, and no file still read
    assert deleted_data | {p for p in kept if p.endswith(".parquet")} == data_before
    for path in report.deleted_files:
        assert not Path(path.removeprefix("file://")).exists()
    for path in kept:
        assert Path(path.removeprefix("file://")).exists()
    ids = sorted(table.scan().to_arrow().column("id").to_pylist())
    assert ids == [*range(1000, 1050), *range(2000, 2010)]
