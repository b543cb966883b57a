"""Arrow types of decoded JSON: merged across a batch, integers narrowed, arrays cast to the batch's type.

JSON has no schema, so every chunk of values is typed on its own (:mod:`icesink.jobs.kafka.decode.chunk`)
and the driver merges the chunk types into one type per batch (:func:`merge_schemas`),
the way Spark's JSON inference does:

- the same type stays; ``null`` (a field that was always null) gives way to any type;
- ``int`` and ``bigint`` merge to ``bigint``, integers and doubles to ``double``;
- objects merge field by field (new fields appended), arrays by their element type;
- any other mix (a number here, an object there) becomes ``string``: the values are
  kept as JSON text (:func:`json_text`), never dropped.

Integers are typed as ``int`` when every value of the chunk fits 32 bits and ``bigint``
otherwise (:func:`narrow_integers`), as Kafka Connect's JSON converter does, so a field
whose values outgrow ``int`` widens the table's column through schema evolution.

Everything here is plain pyarrow: it runs in Spark's Python workers as well as on the driver.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def merge_types(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type that holds the values of both ``a`` and ``b`` (see the module docstring)."""
    if a.equals(b):
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    if pa.types.is_integer(a) and pa.types.is_integer(b):
        return pa.int64()
    if _is_number(a) and _is_number(b):
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return pa.struct(_merge_fields(list(a), list(b)))
    if _is_list(a) and _is_list(b):
        return pa.list_(merge_types(a.value_type, b.value_type))
    return pa.string()


def covers(target: pa.DataType, source: pa.DataType) -> bool:
    """Whether :func:`cast_array` gives values of ``source`` type ``target`` exactly, with nothing to convert.

    The same type, ``null``, an integer into ``bigint``, and objects and arrays made of
    those (an object's fields a subset of the target's); not a number into ``double`` nor
    anything into ``string`` (a conversion for the sink's own rules to make).
    """
    if source.equals(target) or pa.types.is_null(source):
        return True
    if pa.types.is_signed_integer(source) and pa.types.is_int64(target):
        return True
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        return fields_covered(list(target), list(source))
    if (
        _is_list(source)
        and _is_list(target)
        and pa.types.is_large_list(source) == pa.types.is_large_list(target)
    ):
        return covers(target.value_type, source.value_type)
    return False


def fields_covered(target: list[pa.Field], source: list[pa.Field]) -> bool:
    """Whether every field of ``source`` is :func:`covers`-ed by the target field of its name.

    A field that never held a value (``null``) needs none: :func:`cast_table` leaves it out.
    """
    by_name = {f.name: f.type for f in target}
    return all(
        covers(by_name[f.name], f.type) if f.name in by_name else pa.types.is_null(f.type) for f in source
    )


def merge_schemas(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """One schema holding every given schema's fields (in first-seen order)."""
    fields: list[pa.Field] = []
    for schema in schemas:
        fields = _merge_fields(fields, list(schema))
    return pa.schema(fields)


def without_nulls(schema: pa.Schema) -> pa.Schema:
    """``schema`` without fields that never held a value: ``null``, ``{}``, ``[]`` or nested in them.

    Such a field gets its column when a value first shows up; until then there is
    nothing to type it by.
    """
    fields = [f.with_type(t) for f in schema if (t := _without_nulls(f.type)) is not None]
    return pa.schema(fields)


def timestamps_as_strings(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every timestamp replaced by string.

    pyarrow's JSON reader types ISO-8601-looking strings as timestamps (and rewrites
    them); JSON has no timestamps, so icesink keeps such values as the strings they are.
    """
    return pa.schema([f.with_type(_map_timestamps(f.type)) for f in schema])


def has_timestamps(data_type: pa.DataType | pa.Schema) -> bool:
    """Whether a timestamp occurs anywhere in ``data_type``."""
    if isinstance(data_type, pa.Schema):
        return any(has_timestamps(f.type) for f in data_type)
    if pa.types.is_timestamp(data_type):
        return True
    if pa.types.is_struct(data_type):
        return any(has_timestamps(f.type) for f in data_type)
    if _is_list(data_type):
        return has_timestamps(data_type.value_type)
    return False


def narrow_integers(table: pa.Table) -> pa.Table:
    """``table`` with each 64-bit integer column (nested too) as 32-bit where all its values fit."""
    columns = [_array(c) for c in table.columns]
    types = [_narrowed_type(c) for c in columns]
    if all(t.equals(c.type) for t, c in zip(types, columns, strict=True)):
        return table
    arrays = [c if t.equals(c.type) else c.cast(t) for c, t in zip(columns, types, strict=True)]
    return pa.Table.from_arrays(arrays, names=table.column_names)


def cast_table(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` as ``schema``: columns by name, missing ones null, each cast with :func:`cast_array`.

    Columns of ``table`` that ``schema`` lacks are left out.
    """
    arrays = []
    for field in schema:
        index = table.schema.get_field_index(field.name)
        if index < 0:
            arrays.append(pa.nulls(table.num_rows, field.type))
        else:
            arrays.append(cast_array(_array(table.column(index)), field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def cast_array(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``, a type made by :func:`merge_types` from the array's own type.

    Objects are matched field by field (missing fields null, extra fields left out),
    numbers widened, and anything cast to ``string`` that is not one kept as JSON text.

    Raises:
        TypeError: ``target`` cannot hold the values (it was not merged from their type).
    """
    source = array.type
    if source.equals(target):
        return array
    if pa.types.is_null(source):
        return pa.nulls(len(array), target)
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        return json_text(array).cast(target)
    if _is_number(source) and _is_number(target):
        return array.cast(target)
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        children = array.flatten()  # each child with the struct's own nulls and offset applied
        by_name = {f.name: child for f, child in zip(source, children, strict=True)}
        arrays = [
            cast_array(by_name[f.name], f.type) if f.name in by_name else pa.nulls(len(array), f.type)
            for f in target
        ]
        return pa.StructArray.from_arrays(arrays, fields=list(target), mask=array.is_null())
    if _is_list(source) and _is_list(target):
        values = cast_array(array.values, target.value_type)
        offsets = array.offsets
        if pa.types.is_large_list(source) and not pa.types.is_large_list(target):
            offsets = offsets.cast(pa.int32())
        list_class = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return list_class.from_arrays(offsets, values, type=target, mask=array.is_null())
    raise TypeError(f"cannot cast values of type {source} to {target}")


def json_text(array: pa.Array) -> pa.Array:
    """Each value as JSON text (strings as they are), for a column typed ``string`` by a merge."""
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        return array
    texts = [None if v is None else json.dumps(v, default=str) for v in array.to_pylist()]
    return pa.array(texts, pa.string())


def _merge_fields(a: list[pa.Field], b: list[pa.Field]) -> list[pa.Field]:
    merged = {f.name: f for f in a}
    for field in b:
        known = merged.get(field.name)
        merged[field.name] = field if known is None else known.with_type(merge_types(known.type, field.type))
    return [f.with_nullable(True) for f in merged.values()]


def _without_nulls(data_type: pa.DataType) -> pa.DataType | None:
    if pa.types.is_null(data_type):
        return None
    if pa.types.is_struct(data_type):
        fields = [f.with_type(t) for f in data_type if (t := _without_nulls(f.type)) is not None]
        return pa.struct(fields) if fields else None
    if _is_list(data_type):
        value_type = _without_nulls(data_type.value_type)
        return pa.list_(value_type) if value_type is not None else None
    return data_type


def _map_timestamps(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(data_type):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([f.with_type(_map_timestamps(f.type)) for f in data_type])
    if _is_list(data_type):
        return pa.list_(_map_timestamps(data_type.value_type))
    return data_type


def _narrowed_type(array: pa.Array) -> pa.DataType:
    data_type = array.type
    if pa.types.is_int64(data_type):
        bounds = pc.min_max(array)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        fits = low is None or (low >= _INT32_MIN and high <= _INT32_MAX)
        return pa.int32() if fits else data_type
    if pa.types.is_struct(data_type):
        children = array.flatten()
        return pa.struct([f.with_type(_narrowed_type(c)) for f, c in zip(data_type, children, strict=True)])
    if _is_list(data_type):
        value_type = _narrowed_type(array.flatten())
        return pa.large_list(value_type) if pa.types.is_large_list(data_type) else pa.list_(value_type)
    return data_type


def _array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def _is_number(data_type: pa.DataType) -> bool:
    return pa.types.is_integer(data_type) or pa.types.is_floating(data_type)


def _is_list(data_type: pa.DataType) -> bool:
    return pa.types.is_list(data_type) or pa.types.is_large_list(data_type)
