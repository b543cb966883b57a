"""diff_schema: what a batch needs that the table lacks, as change objects (no Spark session needed)."""

from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)
from pyspark.sql import types as st

from icesink.errors import SchemaError
from icesink.schema.diff import AddColumn, MakeOptional, SchemaChange, WidenType, count_by_kind, diff_schema

TABLE = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "qty", IntegerType()),
    NestedField(3, "price", FloatType()),
    NestedField(4, "amount", DecimalType(10, 2)),
    NestedField(
        5,
        "address",
        StructType(NestedField(6, "city", StringType()), NestedField(7, "zip", IntegerType(), required=True)),
    ),
    NestedField(
        8, "items", ListType(9, StructType(NestedField(10, "sku", StringType())), element_required=False)
    ),
    NestedField(11, "attrs", MapType(12, StringType(), 13, IntegerType(), value_required=False)),
)


def field(name: str, dt: st.DataType, nullable: bool = True) -> st.StructField:
    return st.StructField(name, dt, nullable)


BASE = [
    field("id", st.LongType(), False),
    field("qty", st.IntegerType()),
    field("price", st.FloatType()),
    field("amount", st.DecimalType(10, 2)),
    field("address", st.StructType([field("city", st.StringType()), field("zip", st.IntegerType())])),
    field("items", st.ArrayType(st.StructType([field("sku", st.StringType())]))),
    field("attrs", st.MapType(st.StringType(), st.IntegerType())),
]


def batch(*replace: st.StructField, drop: tuple[str, ...] = ()) -> st.StructType:
    by_name = {f.name: f for f in BASE}
    for f in replace:
        by_name[f.name] = f
    return st.StructType([f for name, f in by_name.items() if name not in drop])


def test_same_schema_needs_nothing() -> None:
    assert diff_schema(TABLE, batch()) == []


def test_narrower_batch_needs_nothing() -> None:
    """Table wider than the batch (short into int, int into decimal, float into a float column)."""
    narrower = batch(
        field("qty", st.ShortType()),
        field("amount", st.DecimalType(8, 2)),
        drop=("price", "items", "attrs"),
    )
    assert diff_schema(TABLE, narrower) == []


def test_new_top_level_and_nested_columns_are_optional() -> None:
    changes = diff_schema(
        TABLE,
        batch(
            field(
                "address",
                st.StructType(
                    [
                        field("city", st.StringType()),
                        field("zip", st.IntegerType()),
                        field("geo", st.StructType([field("lat", st.DoubleType(), False)])),
                    ]
                ),
            ),
            field(
                "items",
                st.ArrayType(st.StructType([field("sku", st.StringType()), field("n", st.LongType())])),
            ),
            field("attrs", st.MapType(st.StringType(), st.IntegerType())),
            field("note", st.StringType(), False),
        ),
    )
    assert [(type(c), c.path) for c in changes] == [
        (AddColumn, ("address", "geo")),
        (AddColumn, ("items", "element", "n")),
        (AddColumn, ("note",)),
    ]
    geo = changes[0]
    assert isinstance(geo, AddColumn) and isinstance(geo.field_type, StructType)
    assert all(not f.required for f in geo.field_type.fields)  # optional at every level
    assert changes[2] == AddColumn((), "note", StringType())


@pytest.mark.parametrize(
    ("column", "batch_type", "expected"),
    [
        ("qty", st.LongType(), WidenType(("qty",), IntegerType(), LongType())),
        ("price", st.DoubleType(), WidenType(("price",), FloatType(), DoubleType())),
        ("amount", st.DecimalType(14, 2), WidenType(("amount",), DecimalType(10, 2), DecimalType(14, 2))),
    ],
)
def test_widening_iceberg_allows(column: str, batch_type: st.DataType, expected: WidenType) -> None:
    assert diff_schema(TABLE, batch(field(column, batch_type))) == [expected]


@pytest.mark.parametrize(
    ("column", "batch_type"),
    [
        ("qty", st.StringType()),  # parsed by normalization, not a schema change
        ("qty", st.DoubleType()),  # int to double is not an Iceberg promotion
        ("amount", st.DecimalType(14, 4)),  # scale differs
        ("id", st.IntegerType()),  # narrower
        ("price", st.LongType()),
        ("address", st.StringType()),  # incompatible: dead-lettered, not evolved
    ],
)
def test_other_type_differences_are_not_schema_changes(column: str, batch_type: st.DataType) -> None:
    assert diff_schema(TABLE, batch(field(column, batch_type))) == []


def test_widening_inside_list_and_map() -> None:
    table = Schema(
        NestedField(1, "xs", ListType(2, IntegerType(), element_required=False)),
        NestedField(3, "m", MapType(4, IntegerType(), 5, FloatType(), value_required=False)),
    )
    changes = diff_schema(
        table,
        st.StructType(
            [field("xs", st.ArrayType(st.LongType())), field("m", st.MapType(st.LongType(), st.DoubleType()))]
        ),
    )
    # Map keys cannot evolve in Iceberg: long keys are left to normalization.
    assert changes == [
        WidenType(("xs", "element"), IntegerType(), LongType()),
        WidenType(("m", "value"), FloatType(), DoubleType()),
    ]


def test_missing_required_column_becomes_optional() -> None:
    changes = diff_schema(
        TABLE,
        batch(field("address", st.StructType([field("city", st.StringType())])), drop=("id",)),
    )
    assert changes == [MakeOptional(("id",)), MakeOptional(("address", "zip"))]


def test_names_match_ignoring_case_unless_told() -> None:
    upper = st.StructType([field("ID", st.LongType(), False), field("QTY", st.LongType())])
    assert diff_schema(TABLE, upper) == [WidenType(("qty",), IntegerType(), LongType())]
    changes = diff_schema(TABLE, upper, case_sensitive=True)
    assert AddColumn((), "ID", LongType()) in changes and AddColumn((), "QTY", LongType()) in changes


def test_columns_differing_only_in_case_are_ambiguous() -> None:
    twins = st.StructType(
        [field("id", st.LongType(), False), field("qty", st.IntegerType()), field("QTY", st.IntegerType())]
    )
    with pytest.raises(SchemaError, match=r"'qty' and 'QTY'.*schema\.case-sensitive"):
        diff_schema(TABLE, twins)
    assert diff_schema(TABLE, twins, case_sensitive=True) == [AddColumn((), "QTY", IntegerType())]


def test_void_columns_are_not_added() -> None:
    assert diff_schema(TABLE, batch(field("nothing", st.NullType()))) == []


def test_unsupported_type_names_column_and_fix() -> None:
    with pytest.raises(SchemaError, match=r"'span'.*interval.*hint"):
        diff_schema(TABLE, batch(field("span", st.DayTimeIntervalType())))


def test_count_by_kind() -> None:
    changes: list[SchemaChange] = [
        AddColumn((), "a", StringType()),
        AddColumn((), "b", StringType()),
        WidenType(("qty",), IntegerType(), LongType()),
    ]
    assert count_by_kind(changes) == {"add_column": 2, "widen_type": 1}
