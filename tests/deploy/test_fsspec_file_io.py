"""Tables whose FileIO is pyiceberg's ``FsspecFileIO``: the sink's state and maintenance list through it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import urlparse

import pytest
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyspark.sql import SparkSession

from icesink import IcebergSink, remove_orphan_files
from icesink._pyiceberg import list_files
from tests.support.tables import catalog_from_options, row_multiset, table_rows

pytestmark = pytest.mark.deploy

FSSPEC = "pyiceberg.io.fsspec.FsspecFileIO"


class SilentIO(FileIO):
    """A FileIO that cannot list (only its type matters here)."""

    def new_input(self, location: str) -> InputFile:
        raise NotImplementedError

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError


def test_sink_state_and_orphan_removal_work_through_fsspec(spark: SparkSession, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    options = {
        "table": "db.fs",
        "catalog.name": "default",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "catalog.warehouse": f"file://{warehouse}",
        "catalog.py-io-impl": FSSPEC,
        "sink-id": "fs",
        "commit.max-batches": "2",
        "partition-by": "region",
    }
    sink = IcebergSink.from_options(options)
    rows = [{"id": i, "region": f"r{i % 2}"} for i in range(20)]
    sink(spark.createDataFrame(rows[:10], "id long, region string"), 0)
    IcebergSink.from_options(options)(spark.createDataFrame(rows[10:], "id long, region string"), 1)
    table = catalog_from_options(options).load_table("db.fs")
    assert type(table.io).__name__ == "FsspecFileIO"
    orphan = warehouse / "db" / "fs" / "data" / "orphan.parquet"
    orphan.write_bytes(b"PAR1")

    report = remove_orphan_files(table, older_than=dt.timedelta(0))

    assert report is not None and not orphan.exists()
    assert row_multiset(table_rows(table)) == row_multiset(rows)  # the staged batch 0 resumed once
    on_disk = {str(p) for p in warehouse.rglob("*.parquet")}
    assert on_disk == {urlparse(t.file.file_path).path for t in table.scan().plan_files()}


def test_a_file_io_that_cannot_list_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="py-io-impl") as refused:
        list_files(SilentIO(), f"file://{tmp_path}")
    assert "SilentIO" in str(refused.value)
