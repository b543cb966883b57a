"""Partition values computed in the write task equal pyiceberg's value-by-value transforms."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    YearTransform,
)
from pyiceberg.types import (
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestamptzType,
)

from icesink._pyiceberg import partition_representation
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.keys import arrow_key_functions

SCHEMA = Schema(
    NestedField(1, "i", IntegerType()),
    NestedField(2, "l", LongType()),
    NestedField(3, "s", StringType()),
    NestedField(4, "d", DateType()),
    NestedField(5, "ts", TimestamptzType()),
    NestedField(6, "dec", DecimalType(12, 3)),
    NestedField(7, "nested", StructType(NestedField(8, "a", IntegerType()))),
)
UTC = dt.UTC
ROWS = {
    "i": [0, -1, 7, None, 2**31 - 1],
    "l": [0, -(2**40), 5, 9, None],
    "s": ["", "abcdef", "ü\U0001f600x", None, "z"],
    "d": [dt.date(1970, 1, 1), dt.date(1969, 12, 31), None, dt.date(2024, 2, 29), dt.date(1900, 1, 1)],
    "ts": [
        dt.datetime(2024, 1, 1, 23, 59, tzinfo=UTC),
        dt.datetime(1969, 12, 31, 23, 0, tzinfo=UTC),
        None,
        dt.datetime(1970, 1, 1, tzinfo=UTC),
        dt.datetime(2030, 6, 15, 12, 30, tzinfo=UTC),
    ],
    "dec": [Decimal("1.500"), Decimal("-0.001"), None, Decimal("123456789.123"), Decimal("0.000")],
    "nested": [{"a": 1}, {"a": 2}, None, {"a": None}, {"a": 5}],
}
CASES: list[tuple[int, Transform]] = [
    (1, IdentityTransform()),
    (1, BucketTransform(16)),
    (2, BucketTransform(7)),
    (3, BucketTransform(4)),
    (3, TruncateTransform(3)),
    (1, TruncateTransform(10)),
    (4, DayTransform()),
    (4, MonthTransform()),
    (5, HourTransform()),
    (5, YearTransform()),
    (6, IdentityTransform()),
]


@pytest.mark.parametrize(("source_id", "transform"), CASES, ids=[f"{t}-{s}" for s, t in CASES])
def test_values_equal_pyiceberg_per_value(source_id: int, transform: Transform) -> None:
    spec = PartitionSpec(PartitionField(source_id, 1000, transform, "p"))
    functions = arrow_key_functions(spec, SCHEMA)
    assert functions is not None, f"{transform} of field {source_id} should be computed in the task"
    batch = pa.RecordBatch.from_pydict(ROWS, schema=iceberg_to_arrow_schema(SCHEMA))
    source = SCHEMA.find_field(source_id)
    by_value = transform.transform(source.field_type)
    expected = [
        by_value(partition_representation(source.field_type, v) if v is not None else None)
        for v in ROWS[source.name]  # type: ignore[attr-defined]
    ]
    assert functions[0](batch).to_pylist() == expected


@pytest.mark.parametrize(
    ("source_id", "transform"),
    [(8, BucketTransform(4)), (6, BucketTransform(5)), (6, TruncateTransform(2))],
    ids=["nested-source", "bucket-decimal", "truncate-decimal"],
)
def test_sources_the_task_cannot_read_are_left_to_spark(source_id: int, transform: Transform) -> None:
    spec = PartitionSpec(
        PartitionField(1, 1000, BucketTransform(4), "ok"), PartitionField(source_id, 1001, transform, "p")
    )
    assert arrow_key_functions(spec, SCHEMA) is None
