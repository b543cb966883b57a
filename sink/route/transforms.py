"""Iceberg partition transforms as Spark Column expressions.

:func:`partition_value_column` gives, per row, the value Iceberg stores in a data
file's partition tuple for one partition field: ``bucket[N]`` ids bit-identical to
Iceberg Java, ``truncate[W]``, ``year``/``month``/``day``/``hour`` as ints counted
from 1970-01-01 (floored before it), ``identity`` and ``void``. Everything is built on
the driver from Spark's own functions and evaluated in the JVM; it does not read
``spark.sql.session.timeZone`` and works with ANSI mode on and off.

Two cases fall back to vectorized Arrow UDFs, because Spark's decimal arithmetic
cannot do them exactly: ``bucket`` of a decimal with precision above 18 (its unscaled
value does not fit a long) and ``truncate`` of a decimal(38, S) with S above 6 (the
subtraction would lose scale). They run pyiceberg-core's Rust transforms.

:func:`verify_bucket_function` is the start-up self-check of the bucket hash against
the test vectors of the Iceberg spec (Appendix B).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
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
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sink.errors import BadRecordError, PartitionSpecError, SelfCheckError
from sink.route import murmur3

__all__ = [
    "BUCKET_HASH_VECTORS",
    "HashVector",
    "murmur3_hash_column",
    "partition_value_column",
    "spark_type_of",
    "verify_bucket_function",
]

logger = logging.getLogger(__name__)

TIME_SUPPORTED = hasattr(T, "TimeType") and hasattr(F, "time_to_micros")
"""Whether this pyspark has a TIME type (Spark also needs ``spark.sql.timeType.enabled``)."""

_MICROS_PER_HOUR = 3_600_000_000
_MICROS_PER_DAY = 86_400_000_000
_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
_MAX_LONG_DIGITS = 18
_NTZ_EPOCH = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
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
        return _truncate(source, source_type, transform.width)
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

    Raises:
        PartitionSpecError: Iceberg does not bucket values of ``source_type``.
    """
    _require("bucket", source_type, _BUCKET_TYPES)
    hash_value = _native_hash(source, source_type)
    if hash_value is not None:
        return hash_value
    return _arrow_udf(_hash_decimal_array, T.IntegerType())(source)


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
    """Microseconds since the epoch: UTC for timestamptz, the wall clock for timestamp."""
    if isinstance(source_type, TimestamptzType):
        return F.unix_micros(source)
    # A difference in microseconds never involves a time zone, unlike a cast to long.
    return F.timestamp_diff("MICROSECOND", F.expr(_NTZ_EPOCH), source)


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
        return murmur3.murmur3_bytes(_uuid_bytes(source))
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
    unscaled = (source * F.lit(Decimal(10) ** scale)).cast("long")
    # Bits that must sit below the sign bit: those of the value, or of ~value if negative.
    magnitude = unscaled.bitwiseXOR(F.shiftright(unscaled, 63))
    byte_count = F.shiftright(F.length(F.bin(magnitude)), 3) + 1
    hex_digits = F.lpad(F.hex(unscaled), 16, "0")  # hex() of a negative long is two's complement
    return F.unhex(F.substring(hex_digits, F.lit(17) - byte_count * 2, byte_count * 2))


def _bucket(source: Column, source_type: IcebergType, num_buckets: int) -> Column:
    hash_value = _native_hash(source, source_type)
    if hash_value is not None:
        return murmur3.bucket_of_hash(hash_value, num_buckets)
    return _arrow_udf(_bucket_decimal_array, T.IntegerType(), num_buckets)(source)


def _truncate(source: Column, source_type: IcebergType, width: int) -> Column:
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
        return _arrow_udf(_truncate_decimal_array, spark_type, width)(source)
    width_value = Decimal(width).scaleb(-scale)
    width_column = F.lit(format(width_value, "f")).cast(T.DecimalType(max(len(str(width)), scale), scale))
    truncated = source - F.pmod(source, width_column)
    smallest = -(Decimal(10) ** precision - 1).scaleb(-scale)
    does_not_fit = source.isNotNull() & (
        truncated.isNull() | (truncated < F.lit(format(smallest, "f")).cast(spark_type))
    )
    message = str(
        PartitionSpecError(f"truncate[{width}] of this value is below the range of {source_type}: ")
    )
    return F.when(does_not_fit, F.raise_error(F.concat(F.lit(message), source.cast("string")))).otherwise(
        truncated.cast(spark_type)
    )


def _arrow_udf(
    function: Callable[..., pa.Array], return_type: T.DataType, *args: int
) -> Callable[[Column], Column]:
    """A scalar Arrow UDF applying ``function(values, *args)`` to each Arrow batch."""

    def apply(values: pa.Array) -> pa.Array:
        return function(values, *args)

    # pyspark's stubs only accept an explicit functionType; the type hints above say it.
    arrow_udf: Any = F.arrow_udf
    udf: Callable[[Column], Column] = arrow_udf(apply, return_type)
    return udf


# Executor side: these run inside Spark's Python workers, on one Arrow batch at a time.


def _aligned(values: pa.Array) -> pa.Array:
    """``values`` with a 16-byte aligned data buffer, copied if need be.

    Decimal arrays received from Spark are not always aligned, and pyiceberg-core's Rust
    code panics on those ("Memory pointer from external source ... is not aligned").
    """
    data = values.buffers()[1]
    if data is None or data.address % 16 == 0:
        return values
    return pa.concat_arrays([values])  # allocates from Arrow's pool, which aligns to 64


def _bucket_decimal_array(values: pa.Array, num_buckets: int) -> pa.Array:
    from pyiceberg_core import transform

    return transform.bucket(_aligned(values), num_buckets).cast(pa.int32())


def _truncate_decimal_array(values: pa.Array, width: int) -> pa.Array:
    from pyiceberg_core import transform

    return transform.truncate(_aligned(values), width)


def _hash_decimal_array(values: pa.Array) -> pa.Array:
    import mmh3

    scale = values.type.scale
    exact = Context(prec=80)
    hashes: list[int | None] = []
    for value in values.to_pylist():
        if value is None:
            hashes.append(None)
            continue
        unscaled = int(value.scaleb(scale, context=exact))
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        hashes.append(mmh3.hash(unscaled.to_bytes(length, "big", signed=True)))
    return pa.array(hashes, pa.int32())


# The start-up self-check.


@dataclass(frozen=True)
class HashVector:
    """A value with its known Iceberg bucket hash.

    Attributes:
        source_type: The value's Iceberg type.
        sql_literal: The value as a Spark SQL literal of the matching Spark type.
        expected_hash: Its 32-bit murmur3 hash as Iceberg Java computes it.
    """

    source_type: IcebergType
    sql_literal: str
    expected_hash: int


BUCKET_HASH_VECTORS: tuple[HashVector, ...] = (
    HashVector(IntegerType(), "34", 2017239379),
    HashVector(LongType(), "CAST(34 AS BIGINT)", 2017239379),
    HashVector(DecimalType(9, 2), "CAST(14.20 AS DECIMAL(9,2))", -500754589),
    # Not in the spec's table, but its hash is the same (it depends on the unscaled
    # value only); it covers the path for precisions above 18.
    HashVector(DecimalType(38, 2), "CAST(14.20 AS DECIMAL(38,2))", -500754589),
    HashVector(DateType(), "DATE'2017-11-16'", -653330422),
    HashVector(TimeType(), "TIME'22:31:08'", -662762989),
    HashVector(TimestampType(), "TIMESTAMP_NTZ'2017-11-16 22:31:08'", -2047944441),
    HashVector(TimestamptzType(), "TIMESTAMP_LTZ'2017-11-16 14:31:08-08:00'", -2047944441),
    HashVector(StringType(), "'iceberg'", 1210000089),
    HashVector(UUIDType(), "'f79c3e09-677c-4bbd-a479-3f349cb785e7'", 1488055340),
    HashVector(FixedType(4), "X'00010203'", -188683207),
    HashVector(BinaryType(), "X'00010203'", -188683207),
)
"""The test vectors of the Iceberg spec, Appendix B "32-bit Hash Requirements"."""

_SELF_CHECK_BUCKET_COUNTS = (16, 1000)


def verify_bucket_function(spark: SparkSession, vectors: Sequence[HashVector] = BUCKET_HASH_VECTORS) -> None:
    """Check, once at start-up, that the bucket expressions hash as Iceberg Java does.

    Runs one small Spark job that computes, for every vector, the raw hash with
    :func:`murmur3_hash_column` and bucket ids with :func:`partition_value_column`,
    through the same code paths (code generation, Arrow UDFs) that route real batches.
    Time vectors are skipped unless ``spark.sql.timeType.enabled`` is true.

    Args:
        spark: The session the sink runs in; none of its settings are changed.
        vectors: Values with their known hashes; the spec's by default.

    Raises:
        SelfCheckError: A hash or bucket id differs from the expected one, or the check
            could not run at all.
    """
    time_enabled = TIME_SUPPORTED and spark.conf.get("spark.sql.timeType.enabled", "false") == "true"
    checked = [v for v in vectors if time_enabled or not isinstance(v.source_type, TimeType)]
    columns: list[Column] = []
    for index, vector in enumerate(checked):
        source = F.col(f"value_{index}")
        columns.append(murmur3_hash_column(source, vector.source_type).alias(f"hash_{index}"))
        for count in _SELF_CHECK_BUCKET_COUNTS:
            bucket = partition_value_column(BucketTransform(count), source, vector.source_type)
            columns.append(bucket.alias(f"bucket_{index}_{count}"))
    try:
        literals = [F.expr(v.sql_literal).alias(f"value_{i}") for i, v in enumerate(checked)]
        # Materialized first, so that the optimizer cannot fold the literals into the
        # expressions and evaluate them on the driver: the check runs the generated
        # code that executors run on real batches.
        values = spark.range(1).select(*literals).localCheckpoint(eager=True)
        row = values.select(*columns).first()
    except Exception as e:
        raise SelfCheckError(
            "the bucket hash self-check could not run",
            hint="see the cause; bucketed tables cannot be written safely until it passes",
        ) from e
    assert row is not None
    mismatches: list[tuple[HashVector, str, int, int | None]] = []
    for index, vector in enumerate(checked):
        actual = row[f"hash_{index}"]
        if actual != vector.expected_hash:
            mismatches.append((vector, "hash", vector.expected_hash, actual))
        for count in _SELF_CHECK_BUCKET_COUNTS:
            expected_bucket = (vector.expected_hash & 0x7FFFFFFF) % count
            actual_bucket = row[f"bucket_{index}_{count}"]
            if actual_bucket != expected_bucket:
                mismatches.append((vector, f"bucket[{count}]", expected_bucket, actual_bucket))
    if mismatches:
        first, _, expected, actual = mismatches[0]
        details = "; ".join(
            f"{kind} of {v.source_type} {v.sql_literal}: expected {exp}, got {act}"
            for v, kind, exp, act in mismatches
        )
        raise SelfCheckError(
            f"the bucket hash differs from Iceberg's for {len(mismatches)} check(s): {details}",
            hint="bucket ids would not match Iceberg Java's; do not write bucketed tables with this build",
            source_type=str(first.source_type),
            value=first.sql_literal,
            expected=expected,
            actual=actual,
        )
    logger.info("bucket hash self-check passed for %d values", len(checked))
