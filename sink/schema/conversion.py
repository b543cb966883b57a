"""Spark expressions that convert a batch's values to the table's types, and say when they cannot.

:class:`ColumnConverter` walks the table's schema next to the batch's and returns,
per table column, a :class:`Conversion`: the converted value and the
:class:`Problem` conditions under which a row cannot be written (each with the column
path, a :class:`BadRecordReason` and the offending value as text). Nothing is run
here; :mod:`sink.normalize` puts the expressions into one projection.

Values are converted with ``try_cast`` (null instead of an error), so "the source is
not null and the result is" is a failed conversion. Nested structs are matched field
by field, inside lists (``transform``/``exists``) and map values too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from pyiceberg.types import IcebergType, ListType, MapType, NestedField, PrimitiveType, StructType
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as st

from sink.errors import SchemaError
from sink.schema import casts
from sink.schema.convert import iceberg_to_spark_type
from sink.schema.diff import LIST_ELEMENT, MAP_VALUE, match_fields

_MAP_KEY = "key"
_INFINITY_TEXT = r"^[+-]?inf(inity)?$"  # lower case, trimmed: what Spark's cast reads as infinity
_SHAPE_PROBE = "__icesink_shape"  # a column name never resolved: converting it only shows the structure


class BadRecordReason(StrEnum):
    """Why a row could not be written (a small fixed set: it is a metric label)."""

    PARSE_ERROR = "parse_error"  # a string that does not parse as the column's type
    OUT_OF_RANGE = "out_of_range"  # a value outside the column type's range
    PRECISION_LOSS = "precision_loss"  # a value that would lose digits (1.5 into an int column)
    TYPE_MISMATCH = "type_mismatch"  # a value of a type that cannot be converted (a struct into a long)
    NULL_IN_REQUIRED = "null_in_required"  # null (or missing) in a required column
    DUPLICATE_KEY = "duplicate_key"  # map keys that collide once converted ("1" and "01" into int)


@dataclass(frozen=True)
class Problem:
    """A condition under which a value cannot be written, and what to report then.

    Attributes:
        condition: True for rows with this problem (never null).
        path: The column, dotted (``element``/``key``/``value`` inside lists and maps).
        reason: Why.
        value: The offending value as text.
        range_check: The problem is only a date or timestamp outside the range the sink
            writes (the value itself has the table's type).
    """

    condition: Column
    path: str
    reason: BadRecordReason
    value: Column
    range_check: bool = False


@dataclass(frozen=True)
class Conversion:
    """A source value converted to a table type, and what can go wrong doing so."""

    value: Column
    problems: tuple[Problem, ...] = ()
    identity: bool = False  # ``value`` is the source, untouched


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
            if present is not None and conversion.problems:
                # A field's problems count only where its struct is there at all.
                guarded = tuple(replace(p, condition=present & p.condition) for p in conversion.problems)
                conversion = Conversion(conversion.value, guarded, conversion.identity)
            conversions.append(conversion)
        return conversions

    def _raise_unknown(self, unknown: list[str], parent_path: tuple[str, ...]) -> None:
        where = f"struct {_dotted(parent_path)!r} of " if parent_path else ""
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
            conversion = _primitive(source, source_type, target, path, converted)
        if required and (source_nullable or not conversion.identity):
            value = conversion.value if converted is None else converted
            null = Problem(value.isNull(), _dotted(path), BadRecordReason.NULL_IN_REQUIRED, F.lit("null"))
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
            return _mismatch(source, source_type, iceberg_to_spark_type(target), path)
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
            return _mismatch(source, source_type, iceberg_to_spark_type(target), path)
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
        text = _as_text(source, source_type)
        problems = tuple(
            replace(p, condition=_any(source, element, k), value=text) for k, p in enumerate(shape.problems)
        )
        return Conversion(value, problems, shape.identity)

    def _map(
        self, source: Column, source_type: st.DataType, target: MapType, path: tuple[str, ...]
    ) -> Conversion:
        if not isinstance(source_type, st.MapType):
            return _mismatch(source, source_type, iceberg_to_spark_type(target), path)
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

        text = _as_text(source, source_type)
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
        problems.append(Problem(duplicate, _dotted((*path, _MAP_KEY)), BadRecordReason.DUPLICATE_KEY, text))
        # Building a map from null or repeated keys raises; such rows are dead-lettered anyway.
        clean = ~F.exists(keys, lambda k: k.isNull()) & ~duplicate
        return Conversion(F.when(clean, F.map_from_arrays(keys, values)), tuple(problems))


def _primitive(
    source: Column,
    source_type: st.DataType,
    target: PrimitiveType,
    path: tuple[str, ...],
    converted: Column | None = None,
) -> Conversion:
    conversion = _convert_primitive(source, source_type, target, path, converted)
    bounds = casts.writable_range(iceberg_to_spark_type(target))
    if bounds is None:
        return conversion
    value = conversion.value if converted is None else converted
    outside = value.isNotNull() & ((value < F.expr(bounds[0])) | (value > F.expr(bounds[1])))
    problem = Problem(
        outside, _dotted(path), BadRecordReason.OUT_OF_RANGE, _as_text(source, source_type), range_check=True
    )
    return Conversion(conversion.value, (*conversion.problems, problem), conversion.identity)


def _convert_primitive(
    source: Column,
    source_type: st.DataType,
    target: PrimitiveType,
    path: tuple[str, ...],
    converted: Column | None,
) -> Conversion:
    spark_type = iceberg_to_spark_type(target)
    if source_type == spark_type:
        return Conversion(source, identity=True)
    if isinstance(source_type, st.NullType):
        return Conversion(F.lit(None).cast(spark_type))
    if isinstance(spark_type, st.StringType):
        return Conversion(_as_text(source, source_type, for_string_column=True))
    if not casts.castable(source_type, spark_type):
        return _mismatch(source, source_type, spark_type, path)
    value = source.try_cast(spark_type)
    if casts.always_fits(source_type, spark_type):
        return Conversion(value)
    result = value if converted is None else converted  # what the problems test
    failed = source.isNotNull() & result.isNull()
    column, text = _dotted(path), _as_text(source, source_type)
    problems: list[Problem] = []
    if casts.is_text(source_type):
        if isinstance(spark_type, st.NumericType):
            # A number that does not fit is out of range (or has a fraction), not unparsable.
            number = source.try_cast(st.DoubleType())
            if casts.is_integral(spark_type):
                fraction = failed & (number != F.round(number))
                problems.append(Problem(fraction, column, BadRecordReason.PRECISION_LOSS, text))
            problems.append(Problem(failed & number.isNotNull(), column, BadRecordReason.OUT_OF_RANGE, text))
            if isinstance(spark_type, st.DecimalType):
                # Parsing again is costly: only where there are more decimals than the scale.
                point = F.instr(source, ".")
                long_fraction = (point > 0) & (F.length(source) - point > spark_type.scale)
                rounded = result.isNotNull() & long_fraction & (result.cast(st.DoubleType()) != number)
                problems.append(Problem(rounded, column, BadRecordReason.PRECISION_LOSS, text))
        problems.append(Problem(failed, column, BadRecordReason.PARSE_ERROR, text))
        if isinstance(spark_type, (st.FloatType, st.DoubleType)):
            problems.append(Problem(_overflow(source, result), column, BadRecordReason.OUT_OF_RANGE, text))
    else:
        problems.append(Problem(failed, column, BadRecordReason.OUT_OF_RANGE, text))
    if casts.may_lose_digits(source_type, spark_type):
        changed = F.coalesce(result.try_cast(source_type) != source, F.lit(True))
        problems.append(Problem(result.isNotNull() & changed, column, BadRecordReason.PRECISION_LOSS, text))
    if casts.may_overflow_to_infinity(source_type, spark_type):
        infinite = [float("inf"), float("-inf")]
        overflow = F.coalesce(result.isin(infinite) & ~source.isin(infinite), F.lit(False))
        problems.append(Problem(overflow, column, BadRecordReason.OUT_OF_RANGE, text))
    return Conversion(value, tuple(problems))


def _overflow(text: Column, number: Column) -> Column:
    """Whether parsing ``text`` overflowed to infinity (``"1e400"``): Spark's cast does not fail then.

    An infinity spelled out (``"Infinity"``, ``"-inf"``, as Spark's cast accepts them) is a
    value Iceberg's float and double hold, like ``"NaN"``, and is kept.
    """
    infinite = number.isin([float("inf"), float("-inf")])
    spelled_out = F.lower(F.trim(text)).rlike(_INFINITY_TEXT)
    return F.coalesce(infinite & ~spelled_out, F.lit(False))


def _missing(t_field: NestedField, path: tuple[str, ...], present: Column | None) -> Conversion:
    value = F.lit(None).cast(iceberg_to_spark_type(t_field.field_type))
    if not t_field.required:
        return Conversion(value)
    condition = F.lit(True) if present is None else present
    return Conversion(
        value, (Problem(condition, _dotted(path), BadRecordReason.NULL_IN_REQUIRED, F.lit("null")),)
    )


def _mismatch(
    source: Column, source_type: st.DataType, target: st.DataType, path: tuple[str, ...]
) -> Conversion:
    text = _as_text(source, source_type)
    problem = Problem(source.isNotNull(), _dotted(path), BadRecordReason.TYPE_MISMATCH, text)
    return Conversion(F.lit(None).cast(target), (problem,))


def _any(items: Column, convert: Callable[[Column], Conversion], k: int) -> Column:
    """Whether any element of the array ``items`` has the ``k``-th problem of ``convert``."""
    return F.coalesce(F.exists(items, lambda x: convert(x).problems[k].condition), F.lit(False))


def _as_text(source: Column, source_type: st.DataType, for_string_column: bool = False) -> Column:
    """A value as text: JSON for nested values, base64 for bytes (except into a string column)."""
    if isinstance(source_type, (st.StructType, st.ArrayType, st.MapType)):
        return F.to_json(source)
    if isinstance(source_type, st.BinaryType) and not for_string_column:
        return F.base64(source)
    return source.cast(st.StringType())


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)
