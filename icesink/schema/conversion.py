"""Spark expressions that convert a batch's values to the table's types, and say when they cannot.

:class:`ColumnConverter` walks the table's schema next to the batch's and returns,
per table column, a :class:`~icesink.schema.primitives.Conversion`: the converted value and the
:class:`~icesink.schema.primitives.Problem` conditions under which a row cannot be written (each
with the column path, a :class:`~icesink.schema.primitives.BadRecordReason` and the offending
value as text). Nothing is run here; :mod:`icesink.normalize` puts the expressions into one projection.

A batch field renamed (:mod:`icesink.schema.renames`) to the name of another column of the
table has a problem on every row (``rename_conflict``): its rows go to the dead-letter table.

Values are converted with ``try_cast`` (null instead of an error), so "the source is
not null and the result is" is a failed conversion. Nested structs are matched field
by field, inside lists (``transform``/``exists``) and map values too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from pyiceberg.types import IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.errors import SchemaError
from icesink.schema.diff import LIST_ELEMENT, MAP_VALUE, match_fields
from icesink.schema.primitives import (
    BadRecordReason,
    Conversion,
    Problem,
    as_text,
    convert_primitive,
    dotted,
    mismatch,
)
from icesink.schema.renames import RenameConflict, match_renamed
from icesink.type_mapping import iceberg_to_spark_type

__all__ = ["BadRecordReason", "ColumnConverter", "Conversion", "Problem"]

logger = logging.getLogger(__name__)

_MAP_KEY = "key"
_SHAPE_PROBE = "__icesink_shape"  # a column name never resolved: converting it only shows the structure


class ColumnConverter:
    """Builds the conversion of batch values to a table's types.

    Args:
        table: The table's identifier, for messages.
        case_sensitive: Whether names must match in case.
        evolution_enabled: Whether the schema step may add columns (chooses the hint
            when a batch column has no table column).
    """

    def __init__(self, table: str, case_sensitive: bool, evolution_enabled: bool) -> None:
        self._table = table
        self._case_sensitive = case_sensitive
        self._evolution_enabled = evolution_enabled

    def columns(
        self,
        sources: Sequence[Column],
        source_fields: list[st.StructField],
        table_fields: tuple[NestedField, ...],
        converted: Sequence[Column] | None = None,
    ) -> list[Conversion]:
        """One conversion per table column, in the table's order.

        Args:
            sources: The batch's columns, one per field of ``source_fields``.
            source_fields: The batch's schema.
            table_fields: The table's top-level fields.
            converted: Columns already holding the converted values (of an earlier
                projection), one per table field: the problems then test those instead of
                converting again (Spark does not share a ``try_cast`` between a column
                and the later branches of a ``CASE WHEN``).

        Raises:
            SchemaError: A batch column (other than an all-null ``void`` one) has no
                table column, or two batch columns match the same table column.
        """
        return self._fields(sources, source_fields, table_fields, (), None, converted)

    def _fields(
        self,
        sources: Sequence[Column],
        source_fields: list[st.StructField],
        table_fields: tuple[NestedField, ...],
        parent_path: tuple[str, ...],
        present: Column | None,
        converted: Sequence[Column] | None = None,
    ) -> list[Conversion]:
        matched, extra = match_fields(table_fields, source_fields, parent_path, self._case_sensitive)
        conflicts = match_renamed(
            table_fields, source_fields, matched, extra, parent_path, self._case_sensitive, self._table
        ).conflicts
        unknown = [
            source_fields[i].name for i in extra if not isinstance(source_fields[i].dataType, st.NullType)
        ]
        if unknown:
            self._raise_unknown(unknown, parent_path)
        conversions = []
        for t_index, t_field in enumerate(table_fields):
            path = (*parent_path, t_field.name)
            s_index = matched.get(t_index)
            if s_index is None:
                conversions.append(_missing(t_field, path, present))
                continue
            s_field = source_fields[s_index]
            conversion = self.convert(
                sources[s_index],
                s_field.dataType,
                s_field.nullable,
                t_field.field_type,
                t_field.required,
                path,
                None if converted is None else converted[t_index],
            )
            if s_index in conflicts:
                conversion = self._conflicting(conversion, conflicts[s_index], sources[s_index], s_field)
            if present is not None and conversion.problems:
                # A field's problems count only where its struct is there at all.
                guarded = tuple(replace(p, condition=present & p.condition) for p in conversion.problems)
                conversion = Conversion(conversion.value, guarded, conversion.identity)
            conversions.append(conversion)
        return conversions

    def _conflicting(
        self, conversion: Conversion, conflict: RenameConflict, source: Column, field: st.StructField
    ) -> Conversion:
        """Every row is a dead letter: the field's values are not the column of its name's."""
        error = conflict.error(self._table)
        logger.warning("%s", error)
        problem = Problem(
            F.lit(True),
            dotted((*conflict.parent, conflict.name)),
            BadRecordReason.RENAME_CONFLICT,
            as_text(source, field.dataType),
            detail=str(error),
        )
        return Conversion(conversion.value, (problem, *conversion.problems), conversion.identity)

    def _raise_unknown(self, unknown: list[str], parent_path: tuple[str, ...]) -> None:
        where = f"struct {dotted(parent_path)!r} of " if parent_path else ""
        raise SchemaError(
            f"batch has columns {unknown} that {where}table {self._table} does not have",
            table=self._table,
            hint=(
                "the schema step adds new columns before normalizing; its log lines say why it did not"
                if self._evolution_enabled
                else "enable schema evolution with schema.evolution=add-columns-and-widen, "
                "or drop the columns in the query before the sink"
            ),
        )

    def convert(
        self,
        source: Column,
        source_type: st.DataType,
        source_nullable: bool,
        target: IcebergType,
        required: bool,
        path: tuple[str, ...],
        converted: Column | None = None,
    ) -> Conversion:
        """Convert one value to ``target``; a ``required`` one must not end up null.

        ``converted``, when given, holds the converted value already (see :meth:`columns`).
        """
        if isinstance(target, StructType):
            conversion = self._struct(source, source_type, target, path, converted)
        elif isinstance(target, ListType):
            conversion = self._list(source, source_type, target, path)
        elif isinstance(target, MapType):
            conversion = self._map(source, source_type, target, path)
        else:
            assert isinstance(target, PrimitiveType)
            conversion = convert_primitive(source, source_type, target, path, converted)
        if required and (source_nullable or not conversion.identity):
            value = conversion.value if converted is None else converted
            null = Problem(value.isNull(), dotted(path), BadRecordReason.NULL_IN_REQUIRED, F.lit("null"))
            conversion = Conversion(conversion.value, (*conversion.problems, null), conversion.identity)
        return conversion

    def _struct(
        self,
        source: Column,
        source_type: st.DataType,
        target: StructType,
        path: tuple[str, ...],
        converted: Column | None,
    ) -> Conversion:
        if not isinstance(source_type, st.StructType):
            return mismatch(source, source_type, iceberg_to_spark_type(target), path)
        names = [f.name for f in source_type.fields]
        if len({n.lower() for n in names}) < len(names):
            # Spark may resolve struct fields ignoring case: reach them by position instead.
            positional = st.StructType(
                [st.StructField(f"_{i}", f.dataType, f.nullable) for i, f in enumerate(source_type.fields)]
            )
            fields = [source.cast(positional).getField(f"_{i}") for i in range(len(names))]
        else:
            fields = [source.getField(n) for n in names]
        converted_fields = None if converted is None else [converted.getField(f.name) for f in target.fields]
        children = self._fields(
            fields, list(source_type.fields), target.fields, path, source.isNotNull(), converted_fields
        )
        problems = tuple(p for c in children for p in c.problems)
        if names == [f.name for f in target.fields] and all(c.identity for c in children):
            return Conversion(source, problems, identity=True)
        rebuilt = F.struct(*[c.value.alias(f.name) for c, f in zip(children, target.fields, strict=True)])
        return Conversion(F.when(source.isNotNull(), rebuilt), problems)

    def _list(
        self, source: Column, source_type: st.DataType, target: ListType, path: tuple[str, ...]
    ) -> Conversion:
        if not isinstance(source_type, st.ArrayType):
            return mismatch(source, source_type, iceberg_to_spark_type(target), path)
        element_type, contains_null = source_type.elementType, source_type.containsNull

        def element(x: Column) -> Conversion:
            return self.convert(
                x,
                element_type,
                contains_null,
                target.element_type,
                target.element_required,
                (*path, LIST_ELEMENT),
            )

        shape = element(F.col(_SHAPE_PROBE))
        value = source if shape.identity else F.transform(source, lambda x: element(x).value)
        text = as_text(source, source_type)
        problems = tuple(
            replace(p, condition=_any(source, element, k), value=text) for k, p in enumerate(shape.problems)
        )
        return Conversion(value, problems, shape.identity)

    def _map(
        self, source: Column, source_type: st.DataType, target: MapType, path: tuple[str, ...]
    ) -> Conversion:
        if not isinstance(source_type, st.MapType):
            return mismatch(source, source_type, iceberg_to_spark_type(target), path)
        s_key, s_value, contains_null = (
            source_type.keyType,
            source_type.valueType,
            source_type.valueContainsNull,
        )

        def key(k: Column) -> Conversion:
            return self.convert(k, s_key, False, target.key_type, True, (*path, _MAP_KEY))

        def value_of(v: Column) -> Conversion:
            return self.convert(
                v, s_value, contains_null, target.value_type, target.value_required, (*path, MAP_VALUE)
            )

        text = as_text(source, source_type)
        key_shape, value_shape = key(F.col(_SHAPE_PROBE)), value_of(F.col(_SHAPE_PROBE))
        problems = [
            replace(p, condition=_any(F.map_keys(source), key, k), value=text)
            for k, p in enumerate(key_shape.problems)
        ]
        problems += [
            replace(p, condition=_any(F.map_values(source), value_of, k), value=text)
            for k, p in enumerate(value_shape.problems)
        ]
        if key_shape.identity:
            if value_shape.identity:
                return Conversion(source, tuple(problems), identity=True)
            return Conversion(F.transform_values(source, lambda _, v: value_of(v).value), tuple(problems))
        keys = F.transform(F.map_keys(source), lambda k: key(k).value)
        values = F.map_values(source)
        if not value_shape.identity:
            values = F.transform(values, lambda v: value_of(v).value)
        duplicate = F.coalesce(F.size(F.array_distinct(keys)) < F.size(keys), F.lit(False))
        problems.append(Problem(duplicate, dotted((*path, _MAP_KEY)), BadRecordReason.DUPLICATE_KEY, text))
        # Building a map from null or repeated keys raises; such rows are dead-lettered anyway.
        clean = ~F.exists(keys, lambda k: k.isNull()) & ~duplicate
        return Conversion(F.when(clean, F.map_from_arrays(keys, values)), tuple(problems))


def _missing(t_field: NestedField, path: tuple[str, ...], present: Column | None) -> Conversion:
    value = F.lit(None).cast(iceberg_to_spark_type(t_field.field_type))
    if not t_field.required:
        return Conversion(value)
    condition = F.lit(True) if present is None else present
    return Conversion(
        value, (Problem(condition, dotted(path), BadRecordReason.NULL_IN_REQUIRED, F.lit("null")),)
    )


def _any(items: Column, convert: Callable[[Column], Conversion], k: int) -> Column:
    """Whether any element of the array ``items`` has the ``k``-th problem of ``convert``."""
    return F.coalesce(F.exists(items, lambda x: convert(x).problems[k].condition), F.lit(False))
