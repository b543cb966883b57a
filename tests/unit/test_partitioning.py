from __future__ import annotations

import pytest
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import LongType, NestedField, StringType, StructType, TimestamptzType

from icesink.errors import PartitionSpecError
from icesink.partitioning import build_partition_spec, parse_partition_by

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "name", StringType()),
    NestedField(4, "nested", StructType(NestedField(5, "city", StringType()))),
)


def test_parse_terms() -> None:
    terms = parse_partition_by("day(ts), bucket(16, id), name, truncate(4, `nested.city`), days(ts)")
    assert [type(t.transform) for t in terms] == [
        DayTransform,
        BucketTransform,
        IdentityTransform,
        TruncateTransform,
        DayTransform,
    ]
    assert terms[1].transform == BucketTransform(16)
    assert terms[3].column == "nested.city"


def test_blank_is_unpartitioned() -> None:
    assert parse_partition_by(None) == [] and parse_partition_by("  ") == []


@pytest.mark.parametrize("text", ["bucket(x, id)", "bucket(0, id)", "nosuch(id)", "day(a, b)", "bucket(16)"])
def test_bad_terms(text: str) -> None:
    with pytest.raises(PartitionSpecError):
        parse_partition_by(text)


def test_spec_uses_iceberg_default_names() -> None:
    spec = build_partition_spec(
        parse_partition_by("day(ts), bucket(16, id), truncate(2, nested.city), name"), SCHEMA
    )
    assert [f.name for f in spec.fields] == ["ts_day", "id_bucket", "nested_city_trunc", "name"]
    assert [f.field_id for f in spec.fields] == [1000, 1001, 1002, 1003]


def test_missing_column_is_named() -> None:
    with pytest.raises(PartitionSpecError, match="'pickup'") as info:
        build_partition_spec(parse_partition_by("day(pickup)"), SCHEMA)
    assert "id" in str(info.value)


def test_impossible_transform_is_named() -> None:
    with pytest.raises(PartitionSpecError, match="name"):
        build_partition_spec(parse_partition_by("day(name)"), SCHEMA)
