"""Type mapping between Spark, Iceberg and Arrow.

Spark -> Iceberg is used when the sink creates a table from a batch's schema (and,
for schema evolution, for new columns); Iceberg -> Spark tells normalization what to
cast each column to; Iceberg -> Arrow (with field ids) is the schema of the Parquet
files the executors write.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import types as st

from icesink.errors import SchemaError

if TYPE_CHECKING:
    from pyiceberg.table import Table


class _Ids:
    """Hands out field ids in Iceberg's order: a struct's fields first, then their children."""

    def __init__(self, start: int = 1) -> None:
        self._counter: Iterator[int] = itertools.count(start)

    def next(self) -> int:
        return next(self._counter)


def spark_to_iceberg_schema(struct: st.StructType, first_id: int = 1) -> Schema:
    """Convert a Spark schema to an Iceberg schema with fresh field ids.

    Spark's non-nullable fields become required Iceberg fields.

    Raises:
        SchemaError: A column has a Spark type Iceberg cannot hold (e.g. interval, variant).
    """
    ids = _Ids(first_id)
    return Schema(*_struct_fields(struct, ids, path=""))


def spark_field_to_iceberg(field: st.StructField, field_id: int, ids: _Ids, path: str = "") -> NestedField:
    """Convert one Spark field; nested ids are taken from ``ids``."""
    return NestedField(
        field_id=field_id,
        name=field.name,
        field_type=spark_to_iceberg_type(field.dataType, ids, f"{path}{field.name}"),
        required=not field.nullable,
        doc=(field.metadata or {}).get("comment"),
    )


def _struct_fields(struct: st.StructType, ids: _Ids, path: str) -> list[NestedField]:
    field_ids = [ids.next() for _ in struct.fields]
    return [
        spark_field_to_iceberg(f, fid, ids, path) for f, fid in zip(struct.fields, field_ids, strict=True)
    ]


def spark_to_iceberg_type(dt: st.DataType, ids: _Ids, path: str = "<value>") -> IcebergType:
    """Convert a Spark data type, assigning ids to nested fields from ``ids``."""
    if isinstance(dt, st.BooleanType):
        return BooleanType()
    if isinstance(dt, (st.ByteType, st.ShortType, st.IntegerType)):
        return IntegerType()
    if isinstance(dt, st.LongType):
        return LongType()
    if isinstance(dt, st.FloatType):
        return FloatType()
    if isinstance(dt, st.DoubleType):
        return DoubleType()
    if isinstance(dt, st.DecimalType):
        return DecimalType(dt.precision, dt.scale)
    if isinstance(dt, (st.StringType, st.CharType, st.VarcharType)):
        return StringType()
    if isinstance(dt, st.BinaryType):
        return BinaryType()
    if isinstance(dt, st.DateType):
        return DateType()
    if isinstance(dt, st.TimestampType):
        return TimestamptzType()
    if isinstance(dt, st.TimestampNTZType):
        return TimestampType()
    if hasattr(st, "TimeType") and isinstance(dt, st.TimeType):
        return TimeType()
    if isinstance(dt, st.StructType):
        return StructType(*_struct_fields(dt, ids, f"{path}."))
    if isinstance(dt, st.ArrayType):
        return ListType(
            element_id=ids.next(),
            element=spark_to_iceberg_type(dt.elementType, ids, f"{path}.element"),
            element_required=not dt.containsNull,
        )
    if isinstance(dt, st.MapType):
        key_id, value_id = ids.next(), ids.next()
        return MapType(
            key_id=key_id,
            key_type=spark_to_iceberg_type(dt.keyType, ids, f"{path}.key"),
            value_id=value_id,
            value_type=spark_to_iceberg_type(dt.valueType, ids, f"{path}.value"),
            value_required=not dt.valueContainsNull,
        )
    raise SchemaError(
        f"column {path!r} has Spark type {dt.simpleString()}, which Iceberg cannot hold",
        hint="cast it in the query (e.g. intervals to long, variant to string) before the sink",
    )


def iceberg_to_spark_type(t: IcebergType) -> st.DataType:
    """The Spark type a column of Iceberg type ``t`` is cast to before writing."""
    if isinstance(t, BooleanType):
        return st.BooleanType()
    if isinstance(t, IntegerType):
        return st.IntegerType()
    if isinstance(t, LongType):
        return st.LongType()
    if isinstance(t, FloatType):
        return st.FloatType()
    if isinstance(t, DoubleType):
        return st.DoubleType()
    if isinstance(t, DecimalType):
        return st.DecimalType(t.precision, t.scale)
    if isinstance(t, (StringType, UUIDType)):
        return st.StringType()
    if isinstance(t, (BinaryType, FixedType)):
        return st.BinaryType()
    if isinstance(t, DateType):
        return st.DateType()
    if isinstance(t, TimestamptzType):
        return st.TimestampType()
    if isinstance(t, TimestampType):
        return st.TimestampNTZType()
    if isinstance(t, TimeType) and hasattr(st, "TimeType"):
        return st.TimeType(6)
    if isinstance(t, StructType):
        return st.StructType(
            [st.StructField(f.name, iceberg_to_spark_type(f.field_type), not f.required) for f in t.fields]
        )
    if isinstance(t, ListType):
        return st.ArrayType(iceberg_to_spark_type(t.element_type), not t.element_required)
    if isinstance(t, MapType):
        return st.MapType(
            iceberg_to_spark_type(t.key_type), iceberg_to_spark_type(t.value_type), not t.value_required
        )
    raise SchemaError(
        f"Iceberg type {t} has no Spark equivalent the sink can write",
        hint="write this table with an engine that supports the type, or drop the column",
    )


def iceberg_to_spark_schema(schema: Schema) -> st.StructType:
    """The Spark schema matching an Iceberg schema (names, types, nullability)."""
    return st.StructType(
        [st.StructField(f.name, iceberg_to_spark_type(f.field_type), not f.required) for f in schema.fields]
    )


def iceberg_to_arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema of the data files, carrying Iceberg field ids for Parquet.

    Uses Arrow's 32-bit-offset string, binary and list types, which is what Spark hands
    to Python, so casting a batch from Spark to this schema copies no string data.
    """
    # Imported here: pyiceberg.io.pyarrow imports pandas, which a write task without rows
    # need not load (see icesink._pyiceberg).
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    arrow = schema_to_pyarrow(schema, include_field_ids=True)
    return pa.schema([_small_field(f) for f in arrow], metadata=arrow.metadata)


def _small_field(field: pa.Field) -> pa.Field:
    return field.with_type(_small_type(field.type))


def _small_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_small_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(_small_field(t.key_field), _small_field(t.item_field))
    if pa.types.is_struct(t):
        return pa.struct([_small_field(t.field(i)) for i in range(t.num_fields)])
    return t


def row_schema_of(table: Table) -> pa.Schema:
    """The Arrow type of ``table``'s rows as Spark hands them to a write task."""
    from pyspark.sql.pandas.types import to_arrow_schema  # the driver's: not loaded in write tasks

    schema = iceberg_to_spark_schema(table.schema())
    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pyspark before 4.2: timestamps are always in UTC
        return to_arrow_schema(schema)


def all_optional(row_schema: pa.Schema) -> bool:
    """Whether every column of a table's ``row_schema``, nested ones too, may be null (no row can be bad)."""
    return all(_optional(f) for f in row_schema)


def _optional(f: pa.Field) -> bool:
    """Whether ``f`` and everything nested in it may be null."""
    if not f.nullable:
        return False
    t = f.type
    if pa.types.is_struct(t):
        return all(_optional(t.field(i)) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _optional(t.item_field)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _optional(t.value_field)
    return True
