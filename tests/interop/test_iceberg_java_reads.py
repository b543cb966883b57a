"""Iceberg Java reads what icesink writes: the same rows as pyiceberg and DuckDB, Java's own partition values.

Every table here is written by the sink into a SQLite catalog in ``tmp_path`` and read back
through the one Iceberg Java reader of the run (:mod:`tests.support.iceberg_java.reader`),
whose ``JdbcCatalog`` reads pyiceberg's catalog rows as its own.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.table import Table
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink, compact
from tests.integration.test_schema_evolution import BATCHES as DRIFT_BATCHES
from tests.integration.test_schema_evolution import _expected as drift_expected
from tests.integration.test_upsert_sink import upsert_options
from tests.support.duckdb_reader import duckdb_read
from tests.support.iceberg_java.reader import IcebergJavaReader
from tests.support.tables import catalog_from_options, row_multiset, table_rows
from tests.support.upserts import CHANGE_BATCHES, expected_state, rows_of

pytestmark = pytest.mark.interop

SCHEMA = st.StructType(
    [
        st.StructField("id", st.LongType(), False),
        st.StructField("i", st.IntegerType()),
        st.StructField("s", st.StringType()),
        st.StructField("dec", st.DecimalType(12, 3)),
        st.StructField("d", st.DateType()),
        st.StructField("ts", st.TimestampType()),
        st.StructField("ntz", st.TimestampNTZType()),
        st.StructField("b", st.BinaryType()),
        st.StructField("nested", st.StructType([st.StructField("a", st.IntegerType())])),
        st.StructField("m", st.MapType(st.StringType(), st.LongType())),
    ]
)
ROWS = 120


def _rows(seed: int = 0) -> list[tuple[Any, ...]]:
    base = dt.datetime(2023, 12, 31, 21, 0, 0)
    rows = []
    for k in range(ROWS):
        x = (k * 7919 + seed) % 1000
        rows.append(
            (
                k,
                None if x % 17 == 0 else x - 500,
                None if x % 13 == 0 else f"v{x % 3}-\U0001f600" if x % 5 == 0 else f"value-{x % 4}",
                None if x % 11 == 0 else Decimal(x * 7 - 3000) / Decimal(1000),
                dt.date(1969, 12, 30) + dt.timedelta(days=x % 4),
                base + dt.timedelta(minutes=47 * (x % 5)),
                base + dt.timedelta(days=400 * (x % 3)),
                bytes([x % 256, (x * 3) % 256]),
                (x % 9,),
                {f"k{x % 3}": x},
            )
        )
    return rows


# Java's own function for each transform (Iceberg's Spark functions, ``<catalog>.system.*``)
# over the source column: ``_partition.<field>``, the partition value icesink wrote in the
# file's manifest entry, must equal it on every row.
def _java_function(catalog: str, transform: Any, column: str) -> str:
    if isinstance(transform, BucketTransform):
        return f"{catalog}.system.bucket({transform.num_buckets}, {column})"
    if isinstance(transform, TruncateTransform):
        return f"{catalog}.system.truncate({transform.width}, {column})"
    names = {YearTransform: "years", MonthTransform: "months", DayTransform: "days", HourTransform: "hours"}
    if isinstance(transform, IdentityTransform):
        return column
    return f"{catalog}.system.{names[type(transform)]}({column})"


SPECS = [
    "bucket(4, i), bucket(3, id), bucket(4, s)",
    "bucket(4, dec), bucket(3, d), bucket(4, ts)",
    "bucket(4, b), bucket(2, ntz), hour(ts)",
    "truncate(3, s), truncate(2, dec), identity(d)",
    "year(ts), month(d), day(ntz), truncate(100, i)",
]


def java_rows(java: IcebergJavaReader, options: dict[str, str], table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` (``namespace.name``) as Iceberg Java reads it."""
    return java.sql(f"SELECT * FROM {options['catalog.name']}.{table}", options).to_pylist()


def _check_partitions_are_javas(java: IcebergJavaReader, options: dict[str, str], table: Table) -> None:
    """Every row's partition value, as icesink wrote it, is what Java's own function gives (one query)."""
    catalog = options["catalog.name"]
    schema = table.schema()
    counts = ["count(*) AS n"]
    for field in table.spec().fields:
        column = schema.find_column_name(field.source_id)
        assert column is not None
        javas = _java_function(catalog, field.transform, column)
        counts.append(f"count_if(NOT (_partition.{field.name} <=> {javas})) AS `{field.name} wrong`")
        counts.append(f"count(DISTINCT _partition.{field.name}) AS `{field.name} values`")
    namespace, name = table.name()[-2:]
    result = java.sql(f"SELECT {', '.join(counts)} FROM {catalog}.{namespace}.{name}", options).to_pylist()[0]
    assert result["n"] == ROWS, result
    for field in table.spec().fields:
        assert result[f"{field.name} wrong"] == 0 and result[f"{field.name} values"] > 1, (field.name, result)


@pytest.mark.parametrize("partition_by", SPECS)
def test_every_transform_reads_the_same_and_partition_values_are_javas(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader, partition_by: str
) -> None:
    options = {**catalog_options, "table": "db.parts", "sink-id": "parts", "partition-by": partition_by}
    sink = IcebergSink.from_options(options)
    sink(spark.createDataFrame(_rows(), SCHEMA), 0)
    table = sink.catalog.load_table("db.parts")
    ours = table_rows(table)
    assert len(ours) == ROWS
    assert row_multiset(java_rows(iceberg_java, options, "db.parts")) == row_multiset(ours)
    assert row_multiset(duckdb_read(table.metadata_location).to_pylist()) == row_multiset(ours)
    _check_partitions_are_javas(iceberg_java, options, table)


def test_an_evolved_schema_reads_the_same(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader
) -> None:
    options = {**catalog_options, "table": "db.drift", "sink-id": "drift", "partition-by": "bucket(4, id)"}
    sink = IcebergSink.from_options(options)
    expected: list[dict[str, Any]] = []
    for batch_id, (ddl, rows) in enumerate(DRIFT_BATCHES):
        sink(spark.createDataFrame(rows[:10], ddl), batch_id)
        expected += drift_expected(ddl, rows[:10], spark)
    read = iceberg_java.sql("SELECT * FROM test.db.drift", options)
    types = {field.name: field.type for field in read.schema}
    assert types["qty"] == pa.int64() and types["price"] == pa.float64()
    assert types["amount"] == pa.decimal128(14, 2)
    assert types["address"] == pa.struct([("city", pa.string()), ("zip", pa.int64())])
    assert row_multiset(read.to_pylist()) == row_multiset(expected)


def test_upserts_read_as_the_last_change_of_every_key(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader
) -> None:
    options = upsert_options(catalog_options, **{"sink-id": "items"})
    sink = IcebergSink.from_options(options)
    state: dict[int, tuple[str | None, int | None]] = {}
    for batch_id, batch in enumerate(CHANGE_BATCHES):
        sink(spark.createDataFrame(batch), batch_id)
        expected_state(state, batch)
        if batch_id in (1, len(CHANGE_BATCHES) - 1):  # deletes of the first rows; the last change
            assert rows_of(iceberg_java.sql("SELECT * FROM test.db.items", options)) == state, batch_id
    deletes = iceberg_java.sql("SELECT DISTINCT content FROM test.db.items.delete_files", options)
    assert deletes.to_pylist() == [{"content": 1}]  # position deletes, no equality delete
    assert rows_of(sink.catalog.load_table("db.items").scan().to_arrow()) == state

    compact(sink.catalog.load_table("db.items"), target_file_size_bytes=64 * 1024 * 1024)
    assert rows_of(iceberg_java.sql("SELECT * FROM test.db.items", options)) == state
    assert iceberg_java.sql("SELECT * FROM test.db.items.delete_files", options).num_rows == 0


def test_routed_tables_and_the_dead_letter_table_read_the_same(
    spark: SparkSession, catalog_options: dict[str, str], iceberg_java: IcebergJavaReader
) -> None:
    options = {
        **catalog_options,
        "sink-id": "routed",
        "route.by": "field",
        "route.field": "type",
        "route.tables": '{"click": "ev.click", "view": "ev.view"}',
    }
    schema = "id long, type string, x long"
    rows = [(k, ["click", "view", "buy"][k % 3], k) for k in range(60)]
    with IcebergSink.from_options(options) as sink:
        sink(spark.createDataFrame(rows, schema), 0)
    catalog = catalog_from_options(catalog_options)
    names = ["ev.click", "ev.view", "ev.routed__dlq"]
    assert {".".join(t) for t in catalog.list_tables("ev")} == set(names)
    for name in names:
        ours = table_rows(catalog.load_table(name))
        assert ours and row_multiset(java_rows(iceberg_java, options, name)) == row_multiset(ours), name
    assert sorted(r["id"] for r in java_rows(iceberg_java, options, "ev.click")) == list(range(0, 60, 3))
    assert len(java_rows(iceberg_java, options, "ev.routed__dlq")) == 20  # every "buy" row, none lost
