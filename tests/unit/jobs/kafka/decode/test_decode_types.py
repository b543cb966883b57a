"""Types of decoded JSON: merged across a batch as Spark's JSON inference does, integers narrowed, casts."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icesink.jobs.kafka.decode.types import (
    cast_array,
    cast_table,
    covers,
    merge_schemas,
    merge_types,
    narrow_integers,
    timestamps_as_strings,
    without_nulls,
)

POINT = pa.struct([("x", pa.int64())])


@pytest.mark.parametrize(
    ("a", "b", "merged"),
    [
        (pa.int32(), pa.int32(), pa.int32()),
        (pa.int32(), pa.int64(), pa.int64()),
        (pa.int64(), pa.float64(), pa.float64()),
        (pa.null(), pa.string(), pa.string()),
        (pa.bool_(), pa.int64(), pa.string()),
        (pa.string(), POINT, pa.string()),
        (pa.list_(pa.int32()), pa.list_(pa.float64()), pa.list_(pa.float64())),
        (POINT, pa.struct([("y", pa.string())]), pa.struct([("x", pa.int64()), ("y", pa.string())])),
        (pa.struct([("x", pa.int32())]), pa.struct([("x", pa.string())]), pa.struct([("x", pa.string())])),
    ],
)
def test_merge_types(a: pa.DataType, b: pa.DataType, merged: pa.DataType) -> None:
    assert merge_types(a, b).equals(merged)
    assert sorted_fields(merge_types(b, a)).equals(sorted_fields(merged))  # fields in first-seen order


def sorted_fields(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(data_type):
        return pa.struct(sorted(data_type, key=lambda f: f.name))
    return data_type


def test_merge_schemas_keeps_first_seen_order() -> None:
    merged = merge_schemas(
        [pa.schema([("b", pa.int32()), ("a", pa.string())]), pa.schema([("c", pa.bool_())])]
    )
    assert merged.names == ["b", "a", "c"]


def test_without_nulls_drops_fields_that_never_held_a_value() -> None:
    schema = pa.schema(
        [
            ("a", pa.null()),
            ("b", pa.struct([("c", pa.null())])),
            ("d", pa.list_(pa.null())),
            ("e", pa.struct([("f", pa.null()), ("g", pa.int32())])),
        ]
    )
    assert without_nulls(schema) == pa.schema([("e", pa.struct([("g", pa.int32())]))])


def test_timestamps_become_strings_everywhere() -> None:
    ts = pa.timestamp("s")
    schema = pa.schema([("t", ts), ("s", pa.struct([("t", ts)])), ("l", pa.list_(ts))])
    assert timestamps_as_strings(schema) == pa.schema(
        [("t", pa.string()), ("s", pa.struct([("t", pa.string())])), ("l", pa.list_(pa.string()))]
    )


def test_narrow_integers_only_where_every_value_fits() -> None:
    table = pa.table(
        {
            "small": pa.array([1, -(2**31)], pa.int64()),
            "big": pa.array([1, 2**31], pa.int64()),
            "nested": pa.array(
                [{"x": 1, "l": [2**40]}, None], pa.struct([("x", pa.int64()), ("l", pa.list_(pa.int64()))])
            ),
        }
    )
    narrowed = narrow_integers(table)
    assert narrowed.schema.field("small").type == pa.int32()
    assert narrowed.schema.field("big").type == pa.int64()
    assert narrowed.schema.field("nested").type == pa.struct([("x", pa.int32()), ("l", pa.list_(pa.int64()))])
    assert narrowed.to_pylist() == table.to_pylist()


def test_cast_to_string_keeps_other_values_as_json_text() -> None:
    values = pa.array([{"x": 1}, None], POINT)
    assert cast_array(values, pa.string()).to_pylist() == ['{"x": 1}', None]
    assert cast_array(pa.array([1.5, None]), pa.string()).to_pylist() == ["1.5", None]
    assert cast_array(pa.array([True]), pa.string()).to_pylist() == ["true"]


def test_cast_structs_by_name_and_lists_by_element() -> None:
    source = pa.array([{"x": 1, "gone": "a"}, None], pa.struct([("x", pa.int32()), ("gone", pa.string())]))
    target = pa.struct([("x", pa.int64()), ("new", pa.string())])
    assert cast_array(source, target).to_pylist() == [{"x": 1, "new": None}, None]
    lists = pa.array([[1, 2], None, []], pa.list_(pa.int32()))
    assert cast_array(lists, pa.list_(pa.float64())).to_pylist() == [[1.0, 2.0], None, []]
    sliced = pa.array([{"x": 1, "gone": "a"}, {"x": 2, "gone": "b"}], source.type).slice(1)
    assert cast_array(sliced, target).to_pylist() == [{"x": 2, "new": None}]


def test_cast_table_fills_missing_columns_and_drops_unknown_ones() -> None:
    table = pa.table({"a": pa.array([1], pa.int32()), "z": ["dropped"]})
    target = pa.schema([("a", pa.int64()), ("b", pa.string())])
    assert cast_table(table, target).to_pylist() == [{"a": 1, "b": None}]


def test_cast_refuses_types_a_merge_never_makes() -> None:
    with pytest.raises(TypeError):
        cast_array(pa.array([1]), POINT)


@pytest.mark.parametrize(
    ("target", "source", "sample"),
    [
        (pa.int64(), pa.int64(), 2**40),
        (pa.int64(), pa.int32(), -7),  # widened without loss
        (pa.string(), pa.null(), None),
        (pa.struct([("x", pa.int64()), ("y", pa.string())]), pa.struct([("x", pa.int32())]), {"x": 3}),
        (pa.struct([("x", pa.int64())]), pa.struct([("x", pa.int64()), ("y", pa.null())]), {"x": 3}),
        (pa.list_(pa.int64()), pa.list_(pa.int32()), [1, None, 3]),
        (pa.uint64(), pa.uint64(), 2**63),
    ],
)
def test_covers_what_casts_exactly(target: pa.DataType, source: pa.DataType, sample: object) -> None:
    assert covers(target, source)
    cast = cast_array(pa.array([sample, None], source), target)
    assert cast.type == target
    expected = (
        {f.name: (sample | {"y": None})[f.name] for f in target} if isinstance(sample, dict) else sample
    )
    assert cast.to_pylist() == [expected, None]


@pytest.mark.parametrize(
    ("target", "source"),
    [
        (pa.int32(), pa.int64()),  # the table's column must widen first
        (pa.float64(), pa.int64()),  # the sink's conversion, not a cast here
        (pa.string(), pa.int64()),
        (pa.struct([("x", pa.int64())]), pa.struct([("x", pa.int64()), ("z", pa.string())])),  # a new field
        (pa.list_(pa.int64()), pa.large_list(pa.int64())),
        (pa.int64(), pa.uint64()),
    ],
)
def test_covers_nothing_that_converts_or_evolves(target: pa.DataType, source: pa.DataType) -> None:
    assert not covers(target, source)
