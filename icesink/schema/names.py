"""Column names: which batch column is which table column, and which names a table cannot take.

Iceberg needs each name once per struct. Spark does not: a DataFrame may hold two ``id``
columns, or ``id`` and ``Id``, which match the same table column when names are
compared ignoring case (``schema.case-sensitive=false``, the default). Both are refused
before a table is created from such a batch, naming the columns and the fix.

Matching a batch column to a table column prefers the exact name: a table that has
both ``id`` and ``Id`` (created case-sensitively, or by another engine) gets each
batch column in the column of its own name. A batch name that matches no table column
exactly and several ignoring case is refused as ambiguous.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StructType
from pyspark.sql import types as st

from icesink.errors import SchemaError

_CASE_HINT = "rename one of them in the query, or set schema.case-sensitive=true to keep them apart"


def check_new_table_names(schema: st.StructType, case_sensitive: bool, table: str) -> None:
    """Fail when a table created from ``schema`` would have a name twice (at any depth).

    Raises:
        SchemaError: Two columns of one struct have the same name, or, unless
            ``case_sensitive``, names that differ only in case; both are named.
    """
    _check_struct(schema, (), case_sensitive, table)


def _check_struct(struct: st.StructType, path: tuple[str, ...], case_sensitive: bool, table: str) -> None:
    check_batch_names([f.name for f in struct.fields], path, case_sensitive, table)
    for field in struct.fields:
        _check_type(field.dataType, (*path, field.name), case_sensitive, table)


def _check_type(data_type: st.DataType, path: tuple[str, ...], case_sensitive: bool, table: str) -> None:
    if isinstance(data_type, st.StructType):
        _check_struct(data_type, path, case_sensitive, table)
    elif isinstance(data_type, st.ArrayType):
        _check_type(data_type.elementType, (*path, "element"), case_sensitive, table)
    elif isinstance(data_type, st.MapType):
        _check_type(data_type.keyType, (*path, "key"), case_sensitive, table)
        _check_type(data_type.valueType, (*path, "value"), case_sensitive, table)


def check_batch_names(
    names: Sequence[str], path: tuple[str, ...], case_sensitive: bool, table: str | None
) -> None:
    """Fail when two of a struct's ``names`` would be one column.

    Raises:
        SchemaError: Two equal names, or (unless ``case_sensitive``) names equal ignoring case.
    """
    seen: dict[str, str] = {}
    where = f"struct {'.'.join(path)!r} of the batch" if path else "the batch"
    for name in names:
        key = name if case_sensitive else name.lower()
        other = seen.get(key)
        if other is None:
            seen[key] = name
            continue
        if other == name:
            raise SchemaError(
                f"{where} has two columns named {name!r}; an Iceberg table needs each name once",
                table=table,
                hint="rename or drop one of them in the query before the sink",
            )
        raise SchemaError(
            f"{where} has columns {other!r} and {name!r}, whose names differ only in case: matching "
            "names ignoring case (schema.case-sensitive=false) would write both to one table column",
            table=table,
            hint=_CASE_HINT,
        )


def match_names(
    table_fields: Sequence[NestedField],
    batch_names: Sequence[str],
    path: tuple[str, ...],
    case_sensitive: bool,
) -> tuple[dict[int, int], list[int]]:
    """Match batch columns to table columns by name: the exact name first, then ignoring case.

    Returns:
        Table field index -> batch field index for the matched fields, and the indexes
        of batch fields the table does not have (in batch order).

    Raises:
        SchemaError: A name repeats; or, ignoring case, a batch name matches several table
            columns and none exactly, two batch names match one table column, or two new
            columns would differ only in case.
    """
    check_batch_names(batch_names, path, True, None)
    exact = {f.name: t for t, f in enumerate(table_fields)}
    matched = {exact[n]: b for b, n in enumerate(batch_names) if n in exact}
    rest = [b for b, n in enumerate(batch_names) if n not in exact]
    if case_sensitive:
        return matched, rest
    folded: dict[str, list[int]] = {}
    for t, f in enumerate(table_fields):
        folded.setdefault(f.name.lower(), []).append(t)
    extra: list[int] = []
    for b in rest:
        name = batch_names[b]
        candidates = folded.get(name.lower(), [])
        if len(candidates) > 1:
            _raise_ambiguous(name, [table_fields[c].name for c in candidates], path)
        if not candidates:
            extra.append(b)
        elif candidates[0] in matched:
            check_batch_names([batch_names[matched[candidates[0]]], name], path, False, None)
        else:
            matched[candidates[0]] = b
    check_batch_names([batch_names[b] for b in extra], path, False, None)  # new columns
    return matched, extra


def _raise_ambiguous(name: str, columns: list[str], path: tuple[str, ...]) -> None:
    where = f"struct {'.'.join(path)!r} of the table" if path else "the table"
    raise SchemaError(
        f"batch column {name!r} matches {len(columns)} columns of {where} ignoring case "
        f"({', '.join(repr(c) for c in columns)}) and none exactly",
        hint=f"rename it in the query to one of {columns} exactly, or set schema.case-sensitive=true",
    )


def column_named(columns: Sequence[str], name: str | None, case_sensitive: bool) -> str | None:
    """The column called ``name`` (case-insensitively unless ``case_sensitive``), or ``None``."""
    if not name:
        return None
    return next((c for c in columns if c == name or (not case_sensitive and c.lower() == name.lower())), None)


def field_path(schema: Schema, field_id: int) -> tuple[str, ...]:
    """The names from the top of ``schema`` down to the field ``field_id`` (through structs).

    Unlike ``Schema.find_column_name``, the parts stay apart: a column named ``a.b`` is
    ``("a.b",)``, a field ``b`` of a struct ``a`` is ``("a", "b")``.

    Raises:
        ValueError: No field of a struct of ``schema`` has that id.
    """
    path = _find_path(schema.as_struct(), field_id)
    if path is None:
        raise ValueError(f"no field with id {field_id} in the structs of schema {schema.schema_id}")
    return path


def _find_path(struct: StructType, field_id: int) -> tuple[str, ...] | None:
    for field in struct.fields:
        if field.field_id == field_id:
            return (field.name,)
        if isinstance(field.field_type, StructType):
            below = _find_path(field.field_type, field_id)
            if below is not None:
                return (field.name, *below)
    return None


def spark_column_name(path: Sequence[str]) -> str:
    """``path`` as a Spark column reference, each part quoted (dots and backticks allowed in names)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in path)
