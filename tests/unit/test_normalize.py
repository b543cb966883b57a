"""normalize(): names matched, values converted, bad rows split off with the right reason."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from icesink.config import BadRecordPolicy
from icesink.errors import BadRecordError, SchemaError
from icesink.normalize import BAD_ROW_COLUMN, NormalizedBatch, NormalizeOptions, bad_record_error, normalize

OPTIONS = NormalizeOptions(table="db.t", dead_letter_table="db.t__dlq")


def run(batch: NormalizedBatch) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The good rows and the dead letters; the rows flagged bad must be the dead letters."""
    good = batch.rows
    dead = [r.asDict() for r in batch.dead_letters.collect()]
    if batch.bad_row_flag:  # collected in Spark: a bad row's values may be more than Python holds
        flag = F.col(BAD_ROW_COLUMN)
        assert batch.rows.filter(flag).count() == len(dead)
        good = batch.rows.filter(~flag).drop(BAD_ROW_COLUMN)
    else:
        assert dead == []
    return [r.asDict(recursive=True) for r in good.collect()], dead


def test_columns_matched_by_name_reordered_cast_and_filled(spark: SparkSession) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "price", DoubleType()),
        NestedField(3, "note", StringType()),
        NestedField(4, "qty", LongType()),
    )
    df = spark.createDataFrame([(3, 1.5, 7)], "QTY int, Price float, id long not null")
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert rows == [{"id": 7, "price": 1.5, "note": None, "qty": 3}]
    assert dead == []
    assert normalize(df, schema, OPTIONS).rows.schema.names == ["id", "price", "note", "qty"]


def test_strings_parse_into_table_types(spark: SparkSession) -> None:
    schema = Schema(
        NestedField(1, "i", IntegerType()),
        NestedField(2, "b", BooleanType()),
        NestedField(3, "d", DateType()),
        NestedField(4, "ts", TimestamptzType()),
        NestedField(5, "dec", DecimalType(10, 2)),
        NestedField(6, "x", DoubleType()),
        NestedField(7, "whole", IntegerType()),  # a whole number with a point, as Spark's cast reads it
        NestedField(8, "big", LongType()),
    )
    df = spark.createDataFrame(
        [
            (
                " 42 ",
                "true",
                "2024-02-29",
                "2024-02-29T23:59:59Z",
                "12.50",
                "1e3",
                "3.0",
                "-9223372036854775808.00",
            )
        ],
        "i string, b string, d string, ts string, dec string, x string, whole string, big string",
    )
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert dead == []
    assert rows == [
        {
            "i": 42,
            "b": True,
            "d": dt.date(2024, 2, 29),
            "ts": dt.datetime(2024, 2, 29, 23, 59, 59),
            "dec": Decimal("12.50"),
            "x": 1000.0,
            "whole": 3,
            "big": -(2**63),
        }
    ]


@pytest.mark.parametrize(
    ("ddl", "table_type", "value", "reason"),
    [
        ("string", IntegerType(), "forty-two", "parse_error"),
        ("string", IntegerType(), "99999999999", "out_of_range"),
        ("string", IntegerType(), "1.5", "precision_loss"),
        ("string", IntegerType(), "1e3", "parse_error"),  # Spark's cast reads no exponent into an int
        ("string", IntegerType(), "2147483648.0", "out_of_range"),
        ("string", LongType(), "9223372036854775808", "out_of_range"),  # 2**63: one above the largest
        ("string", DecimalType(10, 2), "1.255", "precision_loss"),
        ("string", DecimalType(4, 2), "123.4", "out_of_range"),
        ("string", BooleanType(), "maybe", "parse_error"),
        ("string", DateType(), "2024-02-30", "parse_error"),
        ("string", TimestamptzType(), "yesterday", "parse_error"),
        ("bigint", IntegerType(), 2**40, "out_of_range"),
        ("bigint", TimestamptzType(), 10**12, "out_of_range"),  # year 33658: Spark holds it, Python cannot
        ("double", LongType(), 1.5, "precision_loss"),
        ("double", LongType(), float("nan"), "out_of_range"),
        ("decimal(6,3)", DecimalType(6, 1), Decimal("1.234"), "precision_loss"),
        ("binary", IntegerType(), b"\x01", "type_mismatch"),
    ],
)
def test_bad_values_are_split_off_with_reason(
    spark: SparkSession, ddl: str, table_type: Any, value: Any, reason: str
) -> None:
    schema = Schema(NestedField(1, "k", LongType()), NestedField(2, "v", table_type))
    df = spark.createDataFrame([(1, value), (2, None)], f"k long, v {ddl}")
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert rows == [{"k": 2, "v": None}]
    assert [(d["column"], d["reason"]) for d in dead] == [("v", reason)]
    assert '"k":1' in dead[0]["original_row"]


def test_null_in_required_column_and_missing_required_column(spark: SparkSession) -> None:
    schema = Schema(
        NestedField(1, "id", LongType(), required=True), NestedField(2, "tag", StringType(), required=True)
    )
    df = spark.createDataFrame([(1, "a"), (None, "b"), (3, None)], "id long, tag string")
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert rows == [{"id": 1, "tag": "a"}]
    assert sorted((d["column"], d["reason"]) for d in dead) == [
        ("id", "null_in_required"),
        ("tag", "null_in_required"),
    ]
    rows, dead = run(normalize(df.select("id"), schema, OPTIONS))
    assert rows == [] and {d["column"] for d in dead} == {"id", "tag"}  # first problem of each row


def test_nested_structs_matched_field_by_field(spark: SparkSession) -> None:
    schema = Schema(
        NestedField(
            1,
            "s",
            StructType(
                NestedField(2, "a", LongType()),
                NestedField(3, "b", StringType(), required=True),
                NestedField(4, "c", DoubleType()),
            ),
        ),
        NestedField(
            5, "xs", ListType(6, StructType(NestedField(7, "n", IntegerType())), element_required=False)
        ),
        NestedField(8, "m", MapType(9, StringType(), 10, LongType(), value_required=False)),
    )
    df = spark.createDataFrame(
        [
            (("x", "1"), [("1",), ("2",)], {"k": "5"}),  # good: b and a swapped, c missing
            (None, None, None),  # good: nulls
            ((None, "1"), None, None),  # s.b is required
            (("x", "one"), None, None),  # s.a does not parse
            (None, [("1",), ("two",)], None),  # an element does not parse
            (None, None, {"k": "five"}),  # a map value does not parse
        ],
        "s struct<B:string, a:string>, xs array<struct<n:string>>, m map<string,string>",
    )
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert rows == [
        {"s": {"a": 1, "b": "x", "c": None}, "xs": [{"n": 1}, {"n": 2}], "m": {"k": 5}},
        {"s": None, "xs": None, "m": None},
    ]
    assert [(d["column"], d["reason"], d["value"]) for d in dead] == [
        ("s.b", "null_in_required", "null"),
        ("s.a", "parse_error", "one"),
        ("xs.element.n", "parse_error", '[{"n":"1"},{"n":"two"}]'),
        ("m.value", "parse_error", '{"k":"five"}'),
    ]


def test_map_keys_converted_and_collisions_dead_lettered(spark: SparkSession) -> None:
    schema = Schema(NestedField(1, "m", MapType(2, IntegerType(), 3, StringType(), value_required=False)))
    df = spark.createDataFrame(
        [({"1": "a"},), ({"1": "a", "01": "b"},), ({"x": "c"},)], "m map<string,string>"
    )
    rows, dead = run(normalize(df, schema, OPTIONS))
    assert rows == [{"m": {1: "a"}}]
    assert sorted(d["reason"] for d in dead) == ["duplicate_key", "parse_error"]


def test_case_sensitive_matching(spark: SparkSession) -> None:
    schema = Schema(NestedField(1, "a", LongType()), NestedField(2, "A", StringType()))
    df = spark.createDataFrame([(1, "x")], "a long, A string")
    options = NormalizeOptions(table="db.t", case_sensitive=True)
    rows, _ = run(normalize(df, schema, options))
    assert rows == [{"a": 1, "A": "x"}]
    rows, _ = run(normalize(df, schema, OPTIONS))  # ignoring case, exact names still win
    assert rows == [{"a": 1, "A": "x"}]
    only_a = Schema(NestedField(1, "a", LongType()))
    with pytest.raises(SchemaError, match=r"'a' and 'A'.*schema\.case-sensitive=true"):
        normalize(df, only_a, OPTIONS)  # both would land in `a`


def test_column_the_table_lacks_names_the_option(spark: SparkSession) -> None:
    schema = Schema(NestedField(1, "a", LongType()))
    df = spark.createDataFrame([(1, "x", None)], "a long, extra string, nothing void")
    with pytest.raises(SchemaError, match=r"\['extra'\].*schema\.evolution=add-columns-and-widen"):
        normalize(df, schema, NormalizeOptions(table="db.t", evolution_enabled=False))
    rows, _ = run(normalize(df.select("a", "nothing"), schema, OPTIONS))  # void: nothing to lose
    assert rows == [{"a": 1}]


def test_fail_policy_names_value_column_and_option(spark: SparkSession) -> None:
    schema = Schema(NestedField(1, "k", LongType()), NestedField(2, "amount", DecimalType(10, 2)))
    df = spark.createDataFrame([(1, "12.5"), (2, "12,5")], "k long, amount string")
    options = NormalizeOptions(
        table="db.t", on_bad_record=BadRecordPolicy.FAIL, dead_letter_table="db.t__dlq"
    )
    with pytest.raises(Exception) as info:
        normalize(df, schema, options).rows.collect()
    error = bad_record_error(str(info.value), "db.t", 4)
    assert isinstance(error, BadRecordError)
    text = str(error)
    assert "ICESINK-BAD-RECORD" in text and "'12,5'" in text and "'amount'" in text
    assert "on-bad-record=dlq" in text and "db.t__dlq" in text and "batch_id=4" in text
