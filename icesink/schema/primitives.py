"""One primitive value converted to a table type, and the problems that can stop it.

The leaves of :class:`~icesink.schema.conversion.ColumnConverter`'s walk: a ``try_cast``
to the table's type, and per failure mode a :class:`Problem` (the condition, the column,
a :class:`BadRecordReason` and the offending value as text).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pyiceberg.types import PrimitiveType
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.schema import casts
from icesink.type_mapping import iceberg_to_spark_type

__all__ = ["BadRecordReason", "Conversion", "Problem", "as_text", "convert_primitive", "dotted", "mismatch"]

_INFINITY_TEXT = r"^[+-]?inf(inity)?$"  # lower case, trimmed: what Spark's cast reads as infinity
_INTEGRAL_DECIMAL_TEXT = r"^([+-]?[0-9]+)\.0*$"  # a whole number written with a point: "3.0", "-12."


class BadRecordReason(StrEnum):
    """Why a row could not be written (a small fixed set: it is a metric label)."""

    PARSE_ERROR = "parse_error"  # a string that does not parse as the column's type
    OUT_OF_RANGE = "out_of_range"  # a value outside the column type's range
    PRECISION_LOSS = "precision_loss"  # a value that would lose digits (1.5 into an int column)
    TYPE_MISMATCH = "type_mismatch"  # a value of a type that cannot be converted (a struct into a long)
    NULL_IN_REQUIRED = "null_in_required"  # null (or missing) in a required column
    DUPLICATE_KEY = "duplicate_key"  # map keys that collide once converted ("1" and "01" into int)
    UNROUTABLE = "unroutable"  # a routed row whose destination value cannot name a table (null, too long)
    TOO_MANY_TABLES = "too_many_tables"  # a routed row whose value would need a table past route.max-tables
    RENAME_CONFLICT = (
        "rename_conflict"  # a field renamed to the name of another column (icesink.schema.renames)
    )


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
        detail: Why, after the reason's code (``rename_conflict: ICESINK-...``), when the
            code alone does not say.
    """

    condition: Column
    path: str
    reason: BadRecordReason
    value: Column
    range_check: bool = False
    detail: str | None = None

    @property
    def reason_text(self) -> str:
        """The dead letter's reason: the code, then the detail after a colon."""
        return self.reason.value if self.detail is None else f"{self.reason.value}: {self.detail}"


@dataclass(frozen=True)
class Conversion:
    """A source value converted to a table type, and what can go wrong doing so."""

    value: Column
    problems: tuple[Problem, ...] = ()
    identity: bool = False  # ``value`` is the source, untouched


def convert_primitive(
    source: Column,
    source_type: st.DataType,
    target: PrimitiveType,
    path: tuple[str, ...],
    converted: Column | None = None,
) -> Conversion:
    conversion = _cast(source, source_type, target, path, converted)
    bounds = casts.writable_range(iceberg_to_spark_type(target))
    if bounds is None:
        return conversion
    value = conversion.value if converted is None else converted
    outside = value.isNotNull() & ((value < F.expr(bounds[0])) | (value > F.expr(bounds[1])))
    problem = Problem(
        outside, dotted(path), BadRecordReason.OUT_OF_RANGE, as_text(source, source_type), range_check=True
    )
    return Conversion(conversion.value, (*conversion.problems, problem), conversion.identity)


def _cast(
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
        return Conversion(as_text(source, source_type, for_string_column=True))
    if not casts.castable(source_type, spark_type):
        return mismatch(source, source_type, spark_type, path)
    value = source.try_cast(spark_type)
    if casts.is_text(source_type) and casts.is_integral(spark_type):
        # "3.0" is 3, as Spark's cast (non-ANSI) reads it; only its ANSI form refuses a point.
        whole = F.regexp_extract(F.trim(source), _INTEGRAL_DECIMAL_TEXT, 1)
        value = F.coalesce(value, whole.try_cast(spark_type))
    if casts.always_fits(source_type, spark_type):
        return Conversion(value)
    result = value if converted is None else converted  # what the problems test
    failed = source.isNotNull() & result.isNull()
    column, text = dotted(path), as_text(source, source_type)
    problems: list[Problem] = []
    if casts.is_text(source_type):
        if isinstance(spark_type, st.NumericType):
            # A number that does not fit is out of range (or has a fraction), not unparsable.
            number = source.try_cast(st.DoubleType())
            outside = failed & number.isNotNull()
            if casts.is_integral(spark_type):
                fraction = failed & (number != F.round(number))
                problems.append(Problem(fraction, column, BadRecordReason.PRECISION_LOSS, text))
                # A whole number that failed is too large unless it is spelled otherwise ("1e3").
                outside = outside & (F.abs(number) >= float(casts.integral_limit(spark_type)))
            problems.append(Problem(outside, column, BadRecordReason.OUT_OF_RANGE, text))
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


def mismatch(
    source: Column, source_type: st.DataType, target: st.DataType, path: tuple[str, ...]
) -> Conversion:
    text = as_text(source, source_type)
    problem = Problem(source.isNotNull(), dotted(path), BadRecordReason.TYPE_MISMATCH, text)
    return Conversion(F.lit(None).cast(target), (problem,))


def as_text(source: Column, source_type: st.DataType, for_string_column: bool = False) -> Column:
    """A value as text: JSON for nested values, base64 for bytes (except into a string column)."""
    if isinstance(source_type, (st.StructType, st.ArrayType, st.MapType)):
        return F.to_json(source)
    if isinstance(source_type, st.BinaryType) and not for_string_column:
        return F.base64(source)
    return source.cast(st.StringType())


def dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)
