"""Which Spark casts normalization may use, and which of them can fail.

Pure functions over Spark primitive types. They mirror Spark's ANSI cast rules (the
rules ``try_cast`` follows, Spark 4's default) so normalization never builds a cast
Spark would reject at analysis, and never pays for a failure check on a cast that
cannot fail.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as st

_INTEGRAL = (st.ByteType, st.ShortType, st.IntegerType, st.LongType)
_INTEGRAL_DIGITS = {st.ByteType: 3, st.ShortType: 5, st.IntegerType: 10, st.LongType: 19}
_INTEGRAL_BITS: dict[type[st.DataType], int] = {
    st.ByteType: 8,
    st.ShortType: 16,
    st.IntegerType: 32,
    st.LongType: 64,
}
_FLOATING = (st.FloatType, st.DoubleType)
_DATETIME = (st.DateType, st.TimestampType, st.TimestampNTZType)
_TIMESTAMPS = (st.TimestampType, st.TimestampNTZType)


def is_text(t: st.DataType) -> bool:
    """Spark's string types."""
    return isinstance(t, (st.StringType, st.CharType, st.VarcharType))


def is_integral(t: st.DataType) -> bool:
    """Spark's integer types (byte to long)."""
    return isinstance(t, _INTEGRAL)


def integral_limit(t: st.DataType) -> int:
    """2 to the power of an integer type's bits less one: its values lie in ``[-limit, limit)``."""
    return 1 << (_INTEGRAL_BITS[type(t)] - 1)


def castable(source: st.DataType, target: st.DataType) -> bool:
    """Whether Spark's ANSI cast accepts ``source`` -> ``target`` (primitive types).

    Casts to string are always possible and are not asked here.
    """
    if is_text(source):
        return isinstance(target, (st.BinaryType, st.BooleanType, st.NumericType, *_DATETIME))
    numeric_like = (st.NumericType, st.BooleanType)
    if isinstance(source, numeric_like) and isinstance(target, numeric_like):
        return True
    if isinstance(target, st.TimestampType):
        return isinstance(source, (st.NumericType, *_DATETIME))
    if isinstance(target, (st.TimestampNTZType, st.DateType)):
        return isinstance(source, _DATETIME)
    if isinstance(source, st.TimestampType):
        return isinstance(target, st.NumericType)
    return False


def always_fits(source: st.DataType, target: st.DataType) -> bool:
    """Whether every ``source`` value converts to ``target`` without failing (a widening).

    Only meaningful when :func:`castable` holds.
    """
    if isinstance(source, _INTEGRAL):
        if isinstance(target, _INTEGRAL):
            return _INTEGRAL_DIGITS[type(source)] <= _INTEGRAL_DIGITS[type(target)]
        if isinstance(target, st.DecimalType):
            return target.precision - target.scale >= _INTEGRAL_DIGITS[type(source)]
        return isinstance(target, (*_FLOATING, st.BooleanType))
    if isinstance(source, st.FloatType) and isinstance(target, st.DoubleType):
        return True
    if isinstance(source, st.DecimalType):
        if isinstance(target, st.DecimalType):
            integer_digits = source.precision - source.scale
            return target.scale >= source.scale and target.precision - target.scale >= integer_digits
        return isinstance(target, (*_FLOATING, st.BooleanType))
    if isinstance(source, st.BooleanType):
        return True
    if is_text(source):
        return isinstance(target, st.BinaryType)
    if isinstance(source, st.DateType):
        return isinstance(target, _TIMESTAMPS)
    if isinstance(source, _TIMESTAMPS):
        return isinstance(target, (*_TIMESTAMPS, st.DateType))
    return False


def may_lose_digits(source: st.DataType, target: st.DataType) -> bool:
    """Whether a cast that succeeds may still change the value (a fraction, decimal places)."""
    fractional = isinstance(source, (*_FLOATING, st.DecimalType))
    if fractional and isinstance(target, _INTEGRAL):
        return True
    if isinstance(target, st.DecimalType):
        if isinstance(source, st.DecimalType):
            return target.scale < source.scale
        return isinstance(source, _FLOATING)
    return False


def may_overflow_to_infinity(source: st.DataType, target: st.DataType) -> bool:
    """Whether a finite value may become infinite (double into float: Spark does not fail)."""
    return isinstance(source, st.DoubleType) and isinstance(target, st.FloatType)


# Dates and timestamps Spark holds but Python, pyiceberg's statistics and most engines cannot
# (Spark reaches year -290308; Python and Java's LocalDate parsing stop at years 1 and 9999).
_RANGES: dict[type[st.DataType], tuple[str, str]] = {
    st.DateType: ("DATE'0001-01-01'", "DATE'9999-12-31'"),
    st.TimestampType: ("TIMESTAMP'0001-01-01 00:00:00+00:00'", "TIMESTAMP'9999-12-31 23:59:59.999999+00:00'"),
    st.TimestampNTZType: ("TIMESTAMP_NTZ'0001-01-01 00:00:00'", "TIMESTAMP_NTZ'9999-12-31 23:59:59.999999'"),
}


# The same timestamp bounds as microseconds since the epoch (UTC), for Arrow data.
TIMESTAMP_MIN_MICROS = -62_135_596_800_000_000  # 0001-01-01T00:00:00
TIMESTAMP_MAX_MICROS = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999
# The same date bounds as days since the epoch.
DATE_MIN_DAYS = -719_162  # 0001-01-01
DATE_MAX_DAYS = 2_932_896  # 9999-12-31


def arrow_range(t: pa.DataType) -> tuple[int, int] | None:
    """The first and last date (days) or timestamp (microseconds) the sink writes, as Arrow holds
    values of ``t``; ``None`` for any other type."""
    if pa.types.is_date32(t):
        return DATE_MIN_DAYS, DATE_MAX_DAYS
    if pa.types.is_timestamp(t) and t.unit == "us":
        return TIMESTAMP_MIN_MICROS, TIMESTAMP_MAX_MICROS
    return None


def in_arrow_range(column: pa.Array | pa.ChunkedArray, low: int, high: int) -> bool:
    """Whether every value of a date or timestamp ``column``, as Arrow holds it, is within ``low``
    to ``high`` (:func:`arrow_range`); nulls are."""
    values = column.cast(pa.int32() if pa.types.is_date32(column.type) else pa.int64())
    bounds = pc.min_max(values).as_py()
    return bounds["min"] is None or (low <= bounds["min"] and bounds["max"] <= high)


def writable_range(t: st.DataType) -> tuple[str, str] | None:
    """SQL literals of the first and last ``t`` value the sink writes, for dates and timestamps."""
    return _RANGES.get(type(t))
