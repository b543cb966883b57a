"""Iceberg's ``truncate[W]`` transform as Spark Column expressions, bit-identical to Iceberg Java.

Integers wrap the way Java's ``int`` and ``long`` arithmetic does; a decimal whose
truncation falls below its type's range fails the row with a
:class:`~icesink.errors.PartitionSpecError`, and the one case Spark's decimal arithmetic
cannot do exactly runs pyiceberg-core's Arrow transform (:mod:`icesink.route.arrow_fallback`).
"""

from __future__ import annotations

from decimal import Context, Decimal

from pyiceberg.types import BinaryType, DecimalType, IcebergType, IntegerType, LongType, StringType
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icesink.errors import PartitionSpecError
from icesink.route.arrow_fallback import arrow_column, truncate_decimal_array

__all__ = ["truncate_column"]

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
# Decimal's default context keeps 28 digits; these values have up to 38.
_EXACT = Context(prec=80)


def truncate_column(source: Column, source_type: IcebergType, width: int) -> Column:
    """``truncate[width]`` of ``source`` as Iceberg Java computes it (int, long, decimal, string, binary)."""
    if isinstance(source_type, (StringType, BinaryType)):
        # Spark counts a string's length in code points, as Iceberg does; binary in bytes.
        return F.substring(source, 1, width)
    if isinstance(source_type, IntegerType):
        return _truncate_int(source, width)
    if isinstance(source_type, LongType):
        return _truncate_long(source, width)
    assert isinstance(source_type, DecimalType)
    return _truncate_decimal(source, source_type, width)


def _wrap32(value: Column) -> Column:
    """A long reduced to Java ``int`` range the way Java's ``int`` arithmetic wraps."""
    return (value + F.lit(1 << 31)).bitwiseAND(F.lit(0xFFFFFFFF)) - F.lit(1 << 31)


def _truncate_int(source: Column, width: int) -> Column:
    # Java: value - (((value % width) + width) % width), in wrapping int arithmetic.
    value = source.cast("long")
    width_column = F.lit(width)
    offset = _wrap32(value % width_column + width_column) % width_column
    return _wrap32(value - offset).cast("int")


def _truncate_long(source: Column, width: int) -> Column:
    width_column = F.lit(width).cast("long")
    offset = (source % width_column + width_column) % width_column
    # Java wraps value - offset below Long.MIN_VALUE around to the top of the range;
    # ANSI mode would fail instead, so add 2**64 in steps that cannot overflow.
    wrapped = (source - F.lit(_LONG_MIN)) + ((F.lit(_LONG_MAX) - offset) + 1)
    return F.when(source < F.lit(_LONG_MIN) + offset, wrapped).otherwise(source - offset)


def _truncate_decimal(source: Column, source_type: DecimalType, width: int) -> Column:
    precision, scale = source_type.precision, source_type.scale
    spark_type = T.DecimalType(precision, scale)
    if precision >= 38 and scale > 6:
        # Spark would widen value - offset to precision 39 and round it to fewer digits.
        return arrow_column(truncate_decimal_array, spark_type, width)(source)
    width_value = Decimal(width).scaleb(-scale, _EXACT)
    width_column = F.lit(format(width_value, "f")).cast(T.DecimalType(max(len(str(width)), scale), scale))
    # try_subtract: an overflow (only possible at precision 38) becomes null, reported below.
    truncated = F.try_subtract(source, F.pmod(source, width_column))
    smallest = Decimal(1 - 10**precision).scaleb(-scale, _EXACT)
    does_not_fit = source.isNotNull() & (
        truncated.isNull() | (truncated < F.lit(format(smallest, "f")).cast(spark_type))
    )
    message = str(
        PartitionSpecError(f"truncate[{width}] of this value is below the range of {source_type}: ")
    )
    return F.when(does_not_fit, F.raise_error(F.concat(F.lit(message), source.cast("string")))).otherwise(
        truncated.cast(spark_type)
    )
