"""Schema changes as data: what a batch needs that the table's schema lacks.

:func:`diff_schema` compares the table's Iceberg schema with a batch's Spark schema
and returns a list of change objects, nothing else: no catalog, no lock, no I/O. The
:class:`~icesink.schema.coordinator.SchemaCoordinator` applies them under the table's
lock after dropping those another writer already made (by diffing again against the
refreshed table).

Only changes Iceberg allows without rewriting data are produced:

- :class:`AddColumn`: a column (top-level or inside a struct, a list's element struct
  or a map's value struct) the table lacks; always optional, at every nesting level.
- :class:`WidenType`: a promotion Iceberg allows (int to long, float to double,
  decimal precision up with the same scale).
- :class:`MakeOptional`: a required column (or struct field) the batch does not have
  at all; otherwise every row of the batch would be dead-lettered.
- :class:`~icesink.schema.renames.RenameColumn`: a batch field whose ``icesink.renamed-from``
  metadata names a column of the table (:mod:`icesink.schema.renames`): the column is
  renamed, keeping its field id and data, and its type diffed against the field's; or whose
  source id (``icesink.source-id``, :mod:`icesink.schema.source_ids`) a column of another
  name keeps. :class:`~icesink.schema.source_ids.RecordSourceId` keeps a field's source id
  on a column that has none yet.

Anything else (narrowing, incompatible types, a batch that is narrower than the
table) is not a schema change: normalization converts or dead-letters the values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Literal

from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
)
from pyspark.sql import types as st

from icesink.schema.names import match_names
from icesink.schema.renames import RenameColumn, match_renamed
from icesink.schema.source_ids import RecordSourceId, doc_with_source_id, source_id
from icesink.type_mapping import _Ids, spark_to_iceberg_type

ChangeKind = Literal["add_column", "widen_type", "make_optional", "rename_column", "record_source_id"]

# Path parts Iceberg uses for the element of a list and the value of a map.
LIST_ELEMENT = "element"
MAP_VALUE = "value"


@dataclass(frozen=True)
class AddColumn:
    """Add an optional column.

    Attributes:
        parent: Full Iceberg path of the struct that gets the column (``()`` for the
            table itself; list elements and map values appear as ``element``/``value``).
        name: The new column's name, as the batch spells it.
        field_type: Its type; every nested field optional. Field ids are placeholders:
            the table assigns the real ones when the change is committed.
        doc: Its doc: the field's source id (:mod:`icesink.schema.source_ids`), if it has one.
    """

    kind: ClassVar[ChangeKind] = "add_column"
    parent: tuple[str, ...]
    name: str
    field_type: IcebergType
    doc: str | None = None

    @property
    def path(self) -> tuple[str, ...]:
        return (*self.parent, self.name)

    def __str__(self) -> str:
        return f"add column {'.'.join(self.path)} {self.field_type}"


@dataclass(frozen=True)
class WidenType:
    """Promote a primitive column to a wider type Iceberg allows."""

    kind: ClassVar[ChangeKind] = "widen_type"
    path: tuple[str, ...]
    from_type: PrimitiveType
    to_type: PrimitiveType

    def __str__(self) -> str:
        return f"widen {'.'.join(self.path)} from {self.from_type} to {self.to_type}"


@dataclass(frozen=True)
class MakeOptional:
    """Make a required column optional (the batch does not carry it)."""

    kind: ClassVar[ChangeKind] = "make_optional"
    path: tuple[str, ...]

    def __str__(self) -> str:
        return f"make {'.'.join(self.path)} optional"


SchemaChange = AddColumn | WidenType | MakeOptional | RenameColumn | RecordSourceId


def diff_schema(
    table_schema: Schema, batch_schema: st.StructType, *, case_sensitive: bool = False
) -> list[SchemaChange]:
    """The changes ``table_schema`` needs to take every column of ``batch_schema``.

    Columns are matched by name (ignoring case unless ``case_sensitive``), or renamed
    (:mod:`icesink.schema.renames`): a field renamed to the name of another column is
    left alone (normalization dead-letters its rows). A column of
    Spark's ``void`` type (all nulls, no type) is never added. The result is empty
    when the table can take the batch as it is, including when the table is wider
    (a long column receiving ints).

    Raises:
        SchemaError: A new column has a Spark type Iceberg cannot hold, or the batch
            has two columns whose names differ only in case while matching ignores case.
        RenameConflictError: A field's old names are two columns of the table.
    """
    return list(_diff_struct(table_schema.as_struct(), batch_schema, (), case_sensitive))


def match_fields(
    table_fields: tuple[NestedField, ...],
    batch_fields: list[st.StructField],
    path: tuple[str, ...],
    case_sensitive: bool,
) -> tuple[dict[int, int], list[int]]:
    """Match batch fields to table fields by name.

    The exact name wins; ignoring case (unless ``case_sensitive``) only a name no table
    column has exactly matches, and only when it matches one (see :func:`~icesink.schema.names.match_names`).

    Returns:
        Table field index -> batch field index for the matched fields, and the indexes
        of batch fields the table does not have (in batch order).

    Raises:
        SchemaError: A name repeats, or would match ambiguously.
    """

    return match_names(table_fields, [f.name for f in batch_fields], path, case_sensitive)


def _diff_struct(
    table_struct: StructType, batch_struct: st.StructType, path: tuple[str, ...], case_sensitive: bool
) -> Iterator[SchemaChange]:
    batch_fields = list(batch_struct.fields)
    by_name, new = match_fields(table_struct.fields, batch_fields, path, case_sensitive)
    renamed = match_renamed(table_struct.fields, batch_fields, by_name, new, path, case_sensitive)
    yield from renamed.renames  # before any change below them: paths are the table's current names
    matched, extra = renamed.matched, renamed.extra
    for t_index, t_field in enumerate(table_struct.fields):
        b_index = matched.get(t_index)
        if b_index is None:
            if t_field.required:
                yield MakeOptional((*path, t_field.name))
            continue
        if b_index in renamed.conflicts:
            continue  # not this column's values: normalization dead-letters the rows
        batch_type = batch_struct.fields[b_index].dataType
        yield from _diff_type(t_field.field_type, batch_type, (*path, t_field.name), case_sensitive)
    for b_index in extra:
        field = batch_struct.fields[b_index]
        if isinstance(field.dataType, st.NullType):
            continue  # no type to add, and nothing but nulls to lose
        new_path = ".".join((*path, field.name))
        sid = source_id(field)
        yield AddColumn(
            path,
            field.name,
            optional_type(spark_to_iceberg_type(field.dataType, _Ids(), new_path)),
            None if sid is None else doc_with_source_id(None, sid),
        )


def _diff_type(
    table_type: IcebergType, batch_type: st.DataType, path: tuple[str, ...], case_sensitive: bool
) -> Iterator[SchemaChange]:
    if isinstance(table_type, StructType):
        if isinstance(batch_type, st.StructType):
            yield from _diff_struct(table_type, batch_type, path, case_sensitive)
        return
    if isinstance(table_type, ListType):
        if isinstance(batch_type, st.ArrayType):
            yield from _diff_type(
                table_type.element_type, batch_type.elementType, (*path, LIST_ELEMENT), case_sensitive
            )
        return
    if isinstance(table_type, MapType):
        # Iceberg cannot change map keys; only the value side may evolve.
        if isinstance(batch_type, st.MapType):
            yield from _diff_type(
                table_type.value_type, batch_type.valueType, (*path, MAP_VALUE), case_sensitive
            )
        return
    if isinstance(table_type, PrimitiveType):
        wider = widened_type(table_type, batch_type)
        if wider is not None:
            yield WidenType(path, table_type, wider)


def widened_type(table_type: PrimitiveType, batch_type: st.DataType) -> PrimitiveType | None:
    """The type ``table_type`` must be promoted to for ``batch_type`` values, if Iceberg allows one.

    ``None`` when the table type already holds the values, or when no promotion Iceberg
    allows would (those values are converted, or dead-lettered, by normalization).
    """
    if isinstance(table_type, IntegerType) and isinstance(batch_type, st.LongType):
        return LongType()
    if isinstance(table_type, FloatType) and isinstance(batch_type, st.DoubleType):
        return DoubleType()
    if (
        isinstance(table_type, DecimalType)
        and isinstance(batch_type, st.DecimalType)
        and batch_type.scale == table_type.scale
        and batch_type.precision > table_type.precision
    ):
        return DecimalType(batch_type.precision, table_type.scale)
    return None


def optional_type(t: IcebergType) -> IcebergType:
    """``t`` with every nested field, list element and map value optional."""
    if isinstance(t, StructType):
        return StructType(
            *(
                NestedField(f.field_id, f.name, optional_type(f.field_type), required=False, doc=f.doc)
                for f in t.fields
            )
        )
    if isinstance(t, ListType):
        return ListType(t.element_id, optional_type(t.element_type), element_required=False)
    if isinstance(t, MapType):
        return MapType(t.key_id, t.key_type, t.value_id, optional_type(t.value_type), value_required=False)
    return t


def describe(changes: list[SchemaChange]) -> str:
    """One line naming every change, for logs."""
    return "; ".join(str(c) for c in changes) or "no changes"


def count_by_kind(changes: list[SchemaChange]) -> dict[ChangeKind, int]:
    """How many changes of each kind (for metrics)."""
    ordered = sorted(changes, key=lambda c: c.kind)
    return {kind: len(list(group)) for kind, group in itertools.groupby(ordered, key=lambda c: c.kind)}
