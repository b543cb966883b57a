"""Names that differ only in case, repeat, or hold a dot or a backtick: written right, or refused first."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink
from icesink.errors import SchemaError
from tests.support.tables import check_data_files, table_rows


def _sink(catalog_options: dict[str, str], table: str, **options: str) -> IcebergSink:
    return IcebergSink.from_options({**catalog_options, "table": table, "sink-id": "names", **options})


def _schema(*fields: tuple[str, st.DataType]) -> st.StructType:
    return st.StructType([st.StructField(n, t) for n, t in fields])


def test_columns_differing_only_in_case_are_refused_before_the_table_exists(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    schema = _schema(("id", st.LongType()), ("Id", st.LongType()))
    sink = _sink(catalog_options, "db.cased")
    with pytest.raises(SchemaError) as info:
        sink.prepare(schema)
    text = str(info.value)
    assert "'id'" in text and "'Id'" in text and "schema.case-sensitive=true" in text, text
    with pytest.raises(SchemaError, match=r"schema\.case-sensitive=true"):
        sink(spark.createDataFrame([(1, 2)], schema), 0)
    assert not sink.catalog.table_exists("db.cased")


def test_exact_names_win_over_names_matched_ignoring_case(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    """A table has `id` and `Id` (made case-sensitively); a case-insensitive sink writes each to its own."""
    schema = _schema(("id", st.LongType()), ("Id", st.LongType()), ("name", st.StringType()))
    creator = _sink(catalog_options, "db.both", **{"schema.case-sensitive": "true"})
    creator(spark.createDataFrame([(1, 10, "both")], schema), 0)
    sink = _sink(catalog_options, "db.both")  # case-insensitive, the default
    sink(spark.createDataFrame([(2, "lower")], "id long, name string"), 1)
    sink(spark.createDataFrame([(20, "upper")], "Id long, name string"), 2)
    sink(spark.createDataFrame([(3, 30, "swapped")], "Id long, id long, name string"), 3)
    sink(spark.createDataFrame([("Name", 4)], "NAME string, id long"), 4)  # one candidate: case ignored
    rows = table_rows(sink.catalog.load_table("db.both"))
    expected = {
        "both": (1, 10),
        "lower": (2, None),
        "upper": (None, 20),
        "swapped": (30, 3),
        "Name": (4, None),
    }
    assert {r["name"]: (r["id"], r["Id"]) for r in rows} == expected


def test_a_name_matching_two_columns_ignoring_case_is_refused_before_anything_is_written(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    schema = _schema(("id", st.LongType()), ("Id", st.LongType()))
    _sink(catalog_options, "db.ambiguous", **{"schema.case-sensitive": "true"}).prepare(schema)
    sink = _sink(catalog_options, "db.ambiguous")
    with pytest.raises(SchemaError) as info:
        sink(spark.createDataFrame([(1,)], "ID long"), 0)
    text = str(info.value)
    assert "'ID'" in text and "'id'" in text and "'Id'" in text and "schema.case-sensitive=true" in text, text
    table = sink.catalog.load_table("db.ambiguous")
    assert table.current_snapshot() is None and [f.name for f in table.schema().fields] == ["id", "Id"]


@pytest.mark.parametrize("case_sensitive", ["true", "false"])
def test_duplicate_column_names_are_our_error_and_create_no_table(
    spark: SparkSession, catalog_options: dict[str, str], case_sensitive: str
) -> None:
    sink = _sink(catalog_options, "db.dup", **{"schema.case-sensitive": case_sensitive})
    with pytest.raises(SchemaError) as info:
        sink(spark.createDataFrame([(1, 2)], "id long, id long"), 0)
    assert "two columns named 'id'" in str(info.value) and "hint: rename" in str(info.value)
    nested = _schema(("s", _schema(("a", st.LongType()), ("a", st.LongType()))))
    with pytest.raises(SchemaError, match="two columns named 'a'"):
        sink.prepare(nested)
    assert not sink.catalog.table_exists("db.dup")


DOTTED = _schema(("a.b", st.LongType()), ("c`d", st.StringType()), ("e", _schema(("f.g", st.LongType()))))


@pytest.mark.parametrize(
    ("partition_by", "mode"),
    [
        (None, None),
        ("bucket(2, `a.b`)", "bucket"),
        ("`c``d`", "hash"),
        ("bucket(2, `a.b`)", "none"),
        ("`e.f.g`", "hash"),
    ],
)
def test_names_with_dots_and_backticks_are_written_end_to_end(
    spark: SparkSession, catalog_options: dict[str, str], partition_by: str | None, mode: str | None
) -> None:
    options: dict[str, Any] = {"partition-by": partition_by, "distribution-mode": mode}
    sink = _sink(catalog_options, "db.dotted", **{k: v for k, v in options.items() if v is not None})
    rows = [(k, f"v{k % 3}", (k * 10,)) for k in range(40)]
    sink(spark.createDataFrame(rows[:20], DOTTED), 0)
    sink(spark.createDataFrame(rows[20:], DOTTED), 1)
    assert check_data_files(sink.catalog.load_table("db.dotted")) >= 1  # statistics and partition values
    # a later batch adds a column with a dot and a backtick in its name
    wider = _schema(*[(f.name, f.dataType) for f in DOTTED.fields], ("h.`i", st.StringType()))
    sink(spark.createDataFrame([(40, "v1", (400,), "new")], wider), 2)
    table = sink.catalog.load_table("db.dotted")
    read = sorted(table_rows(table), key=lambda r: r["a.b"])
    expected = [{"a.b": a, "c`d": c, "e": {"f.g": e[0]}, "h.`i": None} for a, c, e in rows]
    expected.append({"a.b": 40, "c`d": "v1", "e": {"f.g": 400}, "h.`i": "new"})
    assert read == expected
