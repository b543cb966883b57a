"""Bad configuration fails before the stream starts, with a message that names it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import CatalogError, ConfigError, IcebergSink, PartitionSpecError

SCHEMA = st.StructType([st.StructField("id", st.LongType()), st.StructField("ts", st.TimestampType())])


def test_unknown_option(catalog_options: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"write\.target-file-size"):
        IcebergSink.from_options({**catalog_options, "table": "db.t", "write.target-file-size": "1"})


def test_bad_value(catalog_options: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as info:
        IcebergSink.from_options({**catalog_options, "table": "db.t", "write.target-file-size-bytes": "lots"})
    assert "'lots'" in str(info.value) and "write.target-file-size-bytes" in str(info.value)


def test_missing_catalog(tmp_path: Path) -> None:
    options = {
        "table": "db.t",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{tmp_path}/no/such/folder/catalog.db",
        "catalog.warehouse": f"file://{tmp_path}",
    }
    with pytest.raises(CatalogError, match="cannot load catalog 'default'"):
        IcebergSink.from_options(options)


def test_unknown_catalog_type(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=r"catalog\.type"):
        IcebergSink.from_options({"table": "db.t", "catalog.type": "nosuch"})


def test_partition_field_naming_missing_column(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.t", "partition-by": "day(pickup_ts)"})
    with pytest.raises(PartitionSpecError, match="pickup_ts"):
        sink.prepare(SCHEMA)
    assert sink.catalog.table_exists("db.t") is False


def test_prepare_creates_table(spark: SparkSession, catalog_options: dict[str, str]) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.t", "partition-by": "day(ts)"})
    table = sink.prepare(SCHEMA)
    assert [f.name for f in table.spec().fields] == ["ts_day"]
    assert [f.name for f in table.schema().fields] == ["id", "ts"]


@pytest.mark.parametrize(
    ("partition_by", "named"),
    [
        ("day(id)", ["'day(id)'", "'id'", "long", "date or timestamp"]),
        ("bucket(4, nosuch)", ["'bucket(4, nosuch)'", "'nosuch'", "['id', 'ts']"]),
        ("truncate(4, ts)", ["'truncate(4, ts)'", "'ts'", "timestamptz"]),
    ],
)
def test_partitioning_the_batch_cannot_take_creates_no_table(
    spark: SparkSession, catalog_options: dict[str, str], partition_by: str, named: list[str]
) -> None:
    """Checked against the stream's schema before the table exists, by prepare() and by the first batch."""
    options = {**catalog_options, "table": "db.t", "partition-by": partition_by, "sink-id": "s"}
    sink = IcebergSink.from_options(options)
    with pytest.raises(PartitionSpecError) as info:
        sink.prepare(SCHEMA)
    text = str(info.value)
    assert "'partition-by'" in text and "hint: " in text, text
    for part in named:
        assert part in text, text
    batch = spark.createDataFrame([(1, None)], SCHEMA)
    with pytest.raises(PartitionSpecError):
        IcebergSink.from_options(options)(batch, 0)
    assert sink.catalog.table_exists("db.t") is False


def test_bucket_distribution_for_a_new_table_without_buckets_is_refused_before_creating_it(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = IcebergSink.from_options({**catalog_options, "table": "db.t", "distribution-mode": "bucket"})
    with pytest.raises(ConfigError) as info:
        sink.prepare(SCHEMA)
    text = str(info.value)
    assert "'distribution-mode'" in text and "'bucket'" in text and "partition-by" in text, text
    assert sink.catalog.table_exists("db.t") is False
