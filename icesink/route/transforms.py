"""Iceberg partition transforms as Spark Column expressions.

:func:`partition_value_column` gives, per row, the value Iceberg stores in a data
file's partition tuple for one partition field: ``bucket[N]`` ids bit-identical to
Iceberg Java, ``truncate[W]``, ``year``/``month``/``day``/``hour`` as ints counted
from 1970-01-01 (floored before it), ``identity`` and ``void``. The Columns are built
on the driver from Spark's own functions and run as generated code in the JVM; none
reads ``spark.sql.session.timeZone``, and all work with ANSI mode on and off.

Two cases use vectorized Arrow UDFs running pyiceberg-core's Rust transforms instead
(:mod:`icesink.route.arrow_fallback`), because Spark's decimal arithmetic cannot do them
exactly: ``bucket`` of a decimal with precision above 18 (its unscaled value does not
fit a long) and ``truncate`` of a decimal(38, S) with S above 6 (the subtraction would
be rounded to fewer digits).

The bucket hash of byte strings (string, binary, fixed, and decimals up to precision
18) is an expression of about 3,000 nodes (see :mod:`icesink.route.murmur3`): it runs
about twice as fast as the Arrow UDF, but Spark takes a few hundred milliseconds per
batch to plan it. Other bucket hashes are a single ``hash()`` call.

The start-up self-check of these expressions against the Iceberg spec's hash vectors
is :func:`icesink.route.self_check.verify_bucket_function`.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    VoidTransform,
    YearTransform,
)
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icesink.errors import BadRecordError, PartitionSpecError
from icesink.route import murmur3
from icesink.route.arrow_fallback import (
    arrow_column,
    bucket_decimal_array,
    hash_decimal_array,
)
from icesink.route.truncate import truncate_column

__all__ = ["TIME_SUPPORTED", "murmur3_hash_column", "partition_value_column", "spark_type_of"]

TIME_SUPPORTED = hasattr(T, "TimeType") and hasattr(F, "time_to_micros")
"""Whether this pyspark has a TIME type (Spark also needs ``spark.sql.timeType.enabled``)."""

_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_DAY = 86_400_000_000
_MAX_LONG_DIGITS = 18
# Leading 00 (or FF) bytes followed by a byte whose top bit is 0 (or 1) again.
_REDUNDANT_SIGN_BYTES = "^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])"
_UUID_PATTERN = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"

_TYPE_NAMES: dict[type[IcebergType], str] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    DecimalType: "decimal(P,S)",
    DateType: "date",
    TimeType: "time",
    TimestampType: "timestamp",
    TimestamptzType: "timestamptz",
    StringType: "string",
    UUIDType: "uuid",
    FixedType: "fixed[L]",
    BinaryType: "binary",
}
_TypeSet = tuple[type[IcebergType], ...]
_TIME: _TypeSet = (TimeType,) if TIME_SUPPORTED else ()
_IDENTITY_TYPES: _TypeSet = tuple(t for t in _TYPE_NAMES if TIME_SUPPORTED or t is not TimeType)
_BUCKET_TYPES: _TypeSet = (
    IntegerType,
    LongType,
    DecimalType,
    DateType,
    *_TIME,
    TimestampType,
    TimestamptzType,
)
_BUCKET_TYPES += (StringType, UUIDType, FixedType, BinaryType)
_TRUNCATE_TYPES: _TypeSet = (IntegerType, LongType, DecimalType, StringType, BinaryType)
_DATE_PART_TYPES: _TypeSet = (DateType, TimestampType, TimestamptzType)
_HOUR_TYPES: _TypeSet = (TimestampType, TimestamptzType)


def spark_type_of(source_type: IcebergType) -> T.DataType:
    """The Spark type that holds values of an Iceberg primitive type in icesink.

    Args:
        source_type: An Iceberg primitive type.

    Returns:
        The Spark type: uuid is held as its canonical text, fixed as binary,
        timestamp (without zone) as ``TimestampNTZType``, timestamptz as ``TimestampType``.

    Raises:
        PartitionSpecError: The type has no Spark counterpart here.
    """
    if isinstance(source_type, DecimalType):
        return T.DecimalType(source_type.precision, source_type.scale)
    if isinstance(source_type, TimeType) and TIME_SUPPORTED:
        return T.TimeType()  # type: ignore[attr-defined,unused-ignore]
    simple: dict[type[IcebergType], T.DataType] = {
        BooleanType: T.BooleanType(),
        IntegerType: T.IntegerType(),
        LongType: T.LongType(),
        FloatType: T.FloatType(),
        DoubleType: T.DoubleType(),
        DateType: T.DateType(),
        TimestampType: T.TimestampNTZType(),
        TimestamptzType: T.TimestampType(),
        StringType: T.StringType(),
        UUIDType: T.StringType(),
        FixedType: T.BinaryType(),
        BinaryType: T.BinaryType(),
    }
    spark_type = simple.get(type(source_type))
    if spark_type is None:
        raise PartitionSpecError(
            f"Iceberg type {source_type} has no Spark counterpart in icesink",
            hint="use one of " + ", ".join(_TYPE_NAMES[t] for t in _IDENTITY_TYPES),
            source_type=str(source_type),
        )
    return spark_type


def partition_value_column(
    transform: Transform[Any, Any], source: Column, source_type: IcebergType
) -> Column:
    """The Iceberg partition value of ``transform`` applied to ``source``, per row.

    Args:
        transform: A pyiceberg transform (identity, bucket, truncate, year, month, day,
            hour or void).
        source: The source column, of the Spark type :func:`spark_type_of` gives for
            ``source_type``.
        source_type: The source field's Iceberg type.

    Returns:
        A Column: the source itself for identity; ``IntegerType`` for bucket, year,
        month, day and hour; the source's type for truncate; a typed null for void.
        Nulls stay null.

    Raises:
        PartitionSpecError: The transform cannot be applied to ``source_type``.
    """
    if isinstance(transform, VoidTransform):
        try:
            return F.lit(None).cast(spark_type_of(source_type))
        except PartitionSpecError:
            return F.lit(None).cast(T.IntegerType())
    if isinstance(transform, IdentityTransform):
        _require(str(transform), source_type, _IDENTITY_TYPES)
        return source
    if isinstance(transform, BucketTransform):
        _require(str(transform), source_type, _BUCKET_TYPES)
        return _bucket(source, source_type, transform.num_buckets)
    if isinstance(transform, TruncateTransform):
        _require(str(transform), source_type, _TRUNCATE_TYPES)
        return truncate_column(source, source_type, transform.width)
    if isinstance(transform, HourTransform):
        _require(str(transform), source_type, _HOUR_TYPES)
        return _floor_div(_epoch_micros(source, source_type), _MICROS_PER_HOUR).cast("int")
    if isinstance(transform, DayTransform):
        _require(str(transform), source_type, _DATE_PART_TYPES)
        return _epoch_days(source, source_type)
    if isinstance(transform, (YearTransform, MonthTransform)):
        _require(str(transform), source_type, _DATE_PART_TYPES)
        date = (
            source
            if isinstance(source_type, DateType)
            else F.date_from_unix_date(_epoch_days(source, source_type))
        )
        years = F.year(date) - 1970
        if isinstance(transform, YearTransform):
            return years.cast("int")
        return (years * 12 + F.month(date) - 1).cast("int")
    raise PartitionSpecError(
        f"partition transform {transform} is not supported by icesink",
        hint="use identity, bucket[N], truncate[W], year, month, day, hour or void",
        transform=str(transform),
        source_type=str(source_type),
    )


def murmur3_hash_column(source: Column, source_type: IcebergType) -> Column:
    """The raw 32-bit Iceberg bucket hash (murmur3 x86 32-bit, seed 0) of ``source``.

    Args:
        source: The source column, of the Spark type :func:`spark_type_of` gives.
        source_type: Its Iceberg type; one the bucket transform accepts.

    Returns:
        An ``IntegerType`` column holding the hash as Java's ``int``; null for null.
        Decimals with precision above 18 are hashed in a row-by-row Python UDF, which
        is slow: this column is meant for checks, buckets come from
        :func:`partition_value_column`.

    Raises:
        PartitionSpecError: Iceberg does not bucket values of ``source_type``.
    """
    _require("bucket", source_type, _BUCKET_TYPES)
    hash_value = _native_hash(source, source_type)
    if hash_value is not None:
        return hash_value
    return arrow_column(hash_decimal_array, T.IntegerType())(source)


def _require(transform_name: str, source_type: IcebergType, accepted: _TypeSet) -> None:
    if isinstance(source_type, accepted):
        return
    accepted_names = ", ".join(_TYPE_NAMES[t] for t in accepted)
    raise PartitionSpecError(
        f"partition transform {transform_name} cannot be applied to a column of type {source_type}",
        hint=f"{transform_name} accepts {accepted_names}; partition by another column or transform",
        transform=transform_name,
        source_type=str(source_type),
    )


def _epoch_micros(source: Column, source_type: IcebergType) -> Column:
    """Microseconds since the epoch: UTC for timestamptz, the wall clock for timestamp.

    No time zone is involved. ``unix_micros`` returns a timestamptz's stored value; for
    timestamp (Spark's ``TIMESTAMP_NTZ``, which Spark 4.2's ``unix_micros`` refuses) the
    value is added up from its date and its time of day, none of which depends on the
    session time zone. (Casting to a timestamptz, or ``timestamp_diff`` from an NTZ epoch,
    would resolve the values through the session time zone and shift those in a DST gap.)
    """
    if not isinstance(source_type, TimestampType):
        return F.unix_micros(source)
    day_micros = F.unix_date(source.cast("date")).cast("long") * _MICROS_PER_DAY
    second_micros = (F.date_part(F.lit("SECOND"), source) * 1_000_000).cast("long")  # with its fraction
    return (
        day_micros + (F.hour(source) * 3_600 + F.minute(source) * 60).cast("long") * 1_000_000 + second_micros
    )


def _epoch_days(source: Column, source_type: IcebergType) -> Column:
    if isinstance(source_type, DateType):
        return F.unix_date(source)
    return _floor_div(_epoch_micros(source, source_type), _MICROS_PER_DAY).cast("int")


def _floor_div(value: Column, divisor: int) -> Column:
    """``floor(value / divisor)`` for a positive divisor, in exact integer arithmetic."""
    divisor_column = F.lit(divisor)
    return F.call_function("div", value - F.pmod(value, divisor_column), divisor_column)


def _native_hash(source: Column, source_type: IcebergType) -> Column | None:
    """The bucket hash as a Spark expression, or None where only an Arrow UDF can do it."""
    if isinstance(source_type, (IntegerType, LongType)):
        return murmur3.murmur3_long(source.cast("long"))
    if isinstance(source_type, DateType):
        return murmur3.murmur3_long(F.unix_date(source).cast("long"))
    if isinstance(source_type, TimeType):
        return murmur3.murmur3_long(F.time_to_micros(source))  # type: ignore[attr-defined,unused-ignore]
    if isinstance(source_type, (TimestampType, TimestamptzType)):
        return murmur3.murmur3_long(_epoch_micros(source, source_type))
    if isinstance(source_type, StringType):
        return murmur3.murmur3_bytes(source.cast("binary"))
    if isinstance(source_type, (BinaryType, FixedType)):
        return murmur3.murmur3_bytes(source)
    if isinstance(source_type, UUIDType):
        return murmur3.murmur3_block_bytes(_uuid_bytes(source))
    if isinstance(source_type, DecimalType) and source_type.precision <= _MAX_LONG_DIGITS:
        return murmur3.murmur3_bytes(_decimal_bytes(source, source_type.scale))
    return None


def _uuid_bytes(source: Column) -> Column:
    """The 16 big-endian bytes of a UUID held as text; a malformed UUID fails the task."""
    message = str(BadRecordError("a uuid value is not a UUID in canonical text form: "))
    valid = source.isNull() | source.rlike(_UUID_PATTERN)
    return F.when(valid, F.unhex(F.regexp_replace(source, "-", ""))).otherwise(
        F.raise_error(F.concat(F.lit(message), source))
    )


def _decimal_bytes(source: Column, scale: int) -> Column:
    """Minimal two's-complement big-endian bytes of the unscaled value (precision <= 18)."""
    unscaled = (source * F.lit(Decimal(10**scale))).cast("long")
    # hex() of a negative long is its two's complement; drop the leading bytes that only
    # repeat the sign. Each value is referenced once, which keeps the hash's tree small.
    hex_digits = F.lpad(F.hex(unscaled), 16, "0")
    return F.unhex(F.regexp_replace(hex_digits, _REDUNDANT_SIGN_BYTES, ""))


def _bucket(source: Column, source_type: IcebergType, num_buckets: int) -> Column:
    hash_value = _native_hash(source, source_type)
    if hash_value is not None:
        return murmur3.bucket_of_hash(hash_value, num_buckets)
    return arrow_column(bucket_decimal_array, T.IntegerType(), num_buckets)(source)
