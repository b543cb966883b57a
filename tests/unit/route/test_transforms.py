"""Partition transforms as Spark Columns against pyiceberg's pure-Python transforms.

Spark round trips are slow, so each Hypothesis example evaluates a list of values in
one DataFrame, with the session time zone and ANSI mode drawn too: results must not
depend on either.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from decimal import Context, Decimal
from functools import partial
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
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
    TimestampNanoType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icesink.errors import BadRecordError, PartitionSpecError, SelfCheckError, find_error_code
from icesink.route import murmur3
from icesink.route.arrow_fallback import aligned
from icesink.route.self_check import BUCKET_HASH_VECTORS, HashVector, verify_bucket_function
from icesink.route.transforms import murmur3_hash_column, partition_value_column, spark_type_of
from tests.support.spark_conf import session_conf

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
UTC = dt.UTC
# Zones with DST, half-hour and 45-minute offsets: any use of the session zone shows.
ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata", "Pacific/Chatham", "Australia/Lord_Howe"]
EXACT = Context(prec=100)


def evaluate(
    spark: SparkSession,
    source_types: list[IcebergType],
    rows: list[tuple[Any, ...]],
    columns: dict[str, Callable[[list[Column]], Column]],
    conf: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate ``columns`` over rows of Python values (column ``v{k}`` has type k), in order.

    The rows become an RDD scan, so the columns run as the generated code executors run.
    """
    fields = [T.StructField(f"v{k}", spark_type_of(t)) for k, t in enumerate(source_types)]
    schema = T.StructType([T.StructField("i", T.IntegerType()), *fields])
    settings_for_block = dict(conf or {})
    if any(isinstance(t, TimeType) for t in source_types):
        settings_for_block["spark.sql.timeType.enabled"] = "true"
    with session_conf(spark, settings_for_block):
        df = spark.createDataFrame([(i, *row) for i, row in enumerate(rows)], schema)
        sources = [F.col(f"v{k}") for k in range(len(source_types))]
        result = df.select("i", *[make(sources).alias(name) for name, make in columns.items()]).collect()
    return [row.asDict() for row in sorted(result, key=lambda r: r["i"])]


def evaluate_one(
    spark: SparkSession,
    source_type: IcebergType,
    values: list[Any],
    column: Callable[[Column], Column],
    conf: dict[str, str] | None = None,
) -> list[Any]:
    """``column`` of each value, for a single source type."""
    rows = evaluate(spark, [source_type], [(v,) for v in values], {"out": lambda c: column(c[0])}, conf)
    return [from_spark_value(row["out"]) for row in rows]


# Iceberg Java's integer arithmetic, which wraps where Python's ints do not.


def java_wrap(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def java_rem(value: int, divisor: int) -> int:
    remainder = abs(value) % divisor
    return remainder if value >= 0 else -remainder


def java_truncate(value: int, width: int, bits: int) -> int:
    """``value - (((value % width) + width) % width)`` in Java's ``bits``-bit arithmetic."""
    offset = java_rem(java_wrap(java_rem(value, width) + width, bits), width)
    return java_wrap(value - offset, bits)


# Values per type, as pyiceberg's transforms take them.


def unscaled_to_decimal(unscaled: int, scale: int) -> Decimal:
    return Decimal(unscaled).scaleb(-scale, context=EXACT)


def values_of(source_type: IcebergType) -> st.SearchStrategy[Any]:
    if isinstance(source_type, IntegerType):
        return st.integers(INT_MIN, INT_MAX)
    if isinstance(source_type, LongType):
        return st.integers(LONG_MIN, LONG_MAX)
    if isinstance(source_type, DateType):
        return st.dates()
    if isinstance(source_type, TimeType):
        return st.times()
    if isinstance(source_type, TimestampType):
        return st.datetimes()
    if isinstance(source_type, TimestamptzType):
        return st.datetimes(timezones=st.just(UTC))
    if isinstance(source_type, StringType):
        return st.text(max_size=24)
    if isinstance(source_type, UUIDType):
        return st.uuids()
    if isinstance(source_type, FixedType):
        return st.binary(min_size=len(source_type), max_size=len(source_type))
    if isinstance(source_type, BinaryType):
        return st.binary(max_size=40)
    assert isinstance(source_type, DecimalType)
    largest = 10**source_type.precision - 1
    return st.integers(-largest, largest).map(lambda u: unscaled_to_decimal(u, source_type.scale))


def extremes_of(source_type: IcebergType) -> list[Any]:
    """Values every example includes: range ends, the epoch and its neighbours, empties."""
    if isinstance(source_type, IntegerType):
        return [INT_MIN, INT_MIN + 1, INT_MAX, -1, 0, 1, 34]
    if isinstance(source_type, LongType):
        return [LONG_MIN, LONG_MIN + 1, LONG_MAX, INT_MIN, INT_MAX, -1, 0, 1, 34]
    if isinstance(source_type, DateType):
        return [dt.date.min, dt.date.max, dt.date(1969, 12, 31), dt.date(1970, 1, 1), dt.date(1969, 1, 1)]
    if isinstance(source_type, TimeType):
        return [dt.time.min, dt.time.max, dt.time(22, 31, 8)]
    if isinstance(source_type, (TimestampType, TimestamptzType)):
        tz = UTC if isinstance(source_type, TimestamptzType) else None
        naive = [
            dt.datetime.min,
            dt.datetime.max,
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            dt.datetime(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23),
            dt.datetime(2017, 11, 16, 22, 31, 8),
        ]
        return [d.replace(tzinfo=tz) for d in naive]
    if isinstance(source_type, StringType):
        return ["", "a", "iceberg", "\U0001f600", "a\U0001f600bc\U00010348", "\u00e9t\u00e9", "\x00\x00\x00"]
    if isinstance(source_type, UUIDType):
        return [
            uuid.UUID(int=0),
            uuid.UUID(int=2**128 - 1),
            uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        ]
    if isinstance(source_type, FixedType):
        return [bytes(len(source_type)), b"\xff" * len(source_type)]
    if isinstance(source_type, BinaryType):
        return [b"", b"\x00", b"\x00\x01\x02\x03", b"\xff" * 7, b"\x80" * 5]
    assert isinstance(source_type, DecimalType)
    p, s = source_type.precision, source_type.scale
    unscaled = [10**p - 1, -(10**p - 1), 0, 1, -1, 127, -128, 128, -129, 2**63 - 1, -(2**63), 1420]
    return [unscaled_to_decimal(u, s) for u in unscaled if abs(u) < 10**p]


def to_spark_value(source_type: IcebergType, value: Any, upper_case: bool) -> Any:
    if isinstance(source_type, UUIDType) and value is not None:
        return str(value).upper() if upper_case else str(value)
    return value


def from_spark_value(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray) else value


# The transforms applicable to each type, and what pyiceberg says they give.


def transforms_for(source_type: IcebergType, num_buckets: int, width: int) -> dict[str, Transform[Any, Any]]:
    transforms: dict[str, Transform[Any, Any]] = {"bucket": BucketTransform(num_buckets)}
    if isinstance(source_type, (IntegerType, LongType, StringType, BinaryType, DecimalType)):
        transforms["truncate"] = TruncateTransform(width)
    if isinstance(source_type, (DateType, TimestampType, TimestamptzType)):
        transforms |= {"year": YearTransform(), "month": MonthTransform(), "day": DayTransform()}
    if isinstance(source_type, (TimestampType, TimestamptzType)):
        transforms["hour"] = HourTransform()
    return transforms


def expected_value(transform: Transform[Any, Any], source_type: IcebergType, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(transform, TruncateTransform) and isinstance(source_type, (IntegerType, LongType)):
        bits = 32 if isinstance(source_type, IntegerType) else 64
        expected = java_truncate(value, transform.width, bits)
        python = transform.transform(source_type)(value)
        if transform.width <= 2**30 and -(2 ** (bits - 1)) <= python < 2 ** (bits - 1):
            assert expected == python, "the Java reference disagrees with pyiceberg"
        return expected
    return transform.transform(source_type)(value)


def truncation_fits(source_type: IcebergType, value: Any, width: int) -> bool:
    """Whether ``truncate[width]`` of a decimal stays inside its precision."""
    if not isinstance(source_type, DecimalType) or value is None:
        return True
    truncate: TruncateTransform[Any] = TruncateTransform(width)
    truncated = truncate.transform(source_type)(value)
    assert truncated is not None
    return bool(abs(truncated.scaleb(source_type.scale, context=EXACT)) < 10**source_type.precision)


FIXED_TYPES: list[IcebergType] = [
    IntegerType(),
    LongType(),
    DateType(),
    TimeType(),
    TimestampType(),
    TimestamptzType(),
    StringType(),
    UUIDType(),
    BinaryType(),  # fixed[L] takes the same code path, so is left to the self-check
]


@st.composite
def decimal_types(draw: st.DrawFn, min_precision: int, max_precision: int) -> DecimalType:
    precision = draw(
        st.sampled_from([min_precision, max_precision]) | st.integers(min_precision, max_precision)
    )
    return DecimalType(precision, draw(st.sampled_from([0, precision]) | st.integers(0, precision)))


@settings(
    max_examples=12,
    deadline=None,
    # Each shrinking step is a Spark job; the failure message lists mismatches instead.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(data=st.data())
def test_transforms_match_pyiceberg(spark: SparkSession, data: st.DataObject) -> None:
    """Every transform of every type, for random values, against pyiceberg's Python code.

    Each example evaluates up to ~200 values per type in one DataFrame under a drawn
    session time zone and ANSI mode. Decimals come in two drawn types: precision up to
    18 (native) and above 18 (Arrow UDFs).
    """
    source_types = [
        *FIXED_TYPES,
        data.draw(decimal_types(1, 18), label="decimal up to 18"),
        data.draw(decimal_types(19, 38), label="decimal above 18"),
    ]
    num_buckets = data.draw(
        st.sampled_from([1, 2, 7, 16, 1000, INT_MAX]) | st.integers(1, INT_MAX), label="N"
    )
    width = data.draw(st.sampled_from([1, 2, 3, 10, 2**30]) | st.integers(1, INT_MAX), label="W")
    conf = {
        "spark.sql.session.timeZone": data.draw(st.sampled_from(ZONES), label="time zone"),
        "spark.sql.ansi.enabled": data.draw(st.sampled_from(["true", "false"]), label="ANSI"),
    }
    upper_case = data.draw(st.booleans(), label="upper-case uuids")
    # The hash expressions of byte strings are large, and planning them dominates the
    # test's time: each example checks either raw hashes or bucket ids.
    check_raw_hash = data.draw(st.booleans(), label="raw hashes (else bucket ids)")

    columns_of_type: list[list[Any]] = []
    for source_type in source_types:
        value = values_of(source_type)
        drawn = data.draw(
            st.lists(st.one_of(st.none(), value, value, value), max_size=200), label=str(source_type)
        )
        values = [*drawn, *extremes_of(source_type), None]
        # Decimals whose truncation leaves the precision fail instead (tested below).
        columns_of_type.append([v if truncation_fits(source_type, v, width) else None for v in values])
    length = max(len(values) for values in columns_of_type)
    padded = [values + [None] * (length - len(values)) for values in columns_of_type]
    spark_columns = [
        [to_spark_value(t, v, upper_case) for v in vs] for t, vs in zip(source_types, padded, strict=True)
    ]
    rows = list(zip(*spark_columns, strict=True))

    columns: dict[str, Callable[[list[Column]], Column]] = {}
    expected: dict[str, Callable[[Any], Any]] = {}
    for k, source_type in enumerate(source_types):
        if check_raw_hash:
            columns[f"{k}:hash"] = _hash_at(k, source_type)
            expected[f"{k}:hash"] = BucketTransform(2).transform(source_type, bucket=False)
        # Compared inside Spark: collected timestamps would pass through the local zone.
        columns[f"{k}:identity is source"] = _identity_is_source_at(k, source_type)
        expected[f"{k}:identity is source"] = lambda v: True
        for name, transform in transforms_for(source_type, num_buckets, width).items():
            if name == "bucket" and check_raw_hash:
                continue
            columns[f"{k}:{name}"] = _transform_at(k, transform, source_type)
            expected[f"{k}:{name}"] = partial(expected_value, transform, source_type)
    results = evaluate(spark, source_types, rows, columns, conf)

    mismatches = []
    for index, row in enumerate(results):
        for name, expect in expected.items():
            k = int(name.split(":")[0])
            value = padded[k][index]
            want = None if value is None and not name.endswith("is source") else expect(value)
            got = from_spark_value(row[name])
            if got != want:
                mismatches.append(
                    f"{source_types[k]} {name.split(':')[1]}({value!r}): expected {want!r}, got {got!r}"
                )
    assert not mismatches, (
        f"{len(mismatches)} mismatches under {conf}, N={num_buckets}, W={width}: {mismatches[:5]}"
    )


# The spec's test vectors and the start-up self-check.


def test_spec_vectors_agree_with_pyiceberg() -> None:
    """The vectors are the spec's, so pyiceberg must hash them the same way."""
    values: dict[str, Any] = {
        "int": 34,
        "long": 34,
        "decimal(9, 2)": Decimal("14.20"),
        "decimal(38, 2)": Decimal("14.20"),
        "date": dt.date(2017, 11, 16),
        "time": dt.time(22, 31, 8),
        "timestamp": dt.datetime(2017, 11, 16, 22, 31, 8),
        "timestamptz": dt.datetime(2017, 11, 16, 14, 31, 8, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
        "string": "iceberg",
        "uuid": uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        "fixed[4]": b"\x00\x01\x02\x03",
        "binary": b"\x00\x01\x02\x03",
    }
    assert sorted(values) == sorted(str(v.source_type) for v in BUCKET_HASH_VECTORS)
    for vector in BUCKET_HASH_VECTORS:
        raw_hash = BucketTransform(2).transform(vector.source_type, bucket=False)
        assert raw_hash(values[str(vector.source_type)]) == vector.expected_hash, vector


def test_self_check_passes(spark: SparkSession) -> None:
    with session_conf(spark, {"spark.sql.timeType.enabled": "true"}):  # to include the time vector
        verify_bucket_function(spark)


def test_self_check_names_the_mismatch(spark: SparkSession) -> None:
    right = HashVector(StringType(), "'iceberg'", 1210000089)
    wrong = HashVector(StringType(), "'iceberg'", 1210000088)
    vectors = [right, HashVector(LongType(), "CAST(34 AS BIGINT)", 2017239379), wrong]
    with pytest.raises(SelfCheckError) as raised:
        verify_bucket_function(spark, vectors)
    message = str(raised.value)
    assert "ICESINK-SELF-CHECK" in message
    assert "string 'iceberg': expected 1210000088, got 1210000089" in message
    assert raised.value.context == {
        "source_type": "string",
        "value": "'iceberg'",
        "expected": 1210000088,
        "actual": 1210000089,
    }
    # Only the wrong vector fails: its hash, and its bucket id.
    assert "2 check(s)" in message


def test_self_check_reports_a_failure_to_run(spark: SparkSession) -> None:
    with pytest.raises(SelfCheckError, match="could not run") as raised:
        verify_bucket_function(spark, [HashVector(IntegerType(), "not a literal(", 0)])
    assert raised.value.__cause__ is not None


def test_zero_seed_prefix_hashes_to_zero_in_spark(spark: SparkSession) -> None:
    row = spark.range(1).select(F.hash(F.lit(murmur3.ZERO_SEED_PREFIX)).alias("h")).first()
    assert row is not None and row["h"] == 0


# Time zones and ANSI mode, on values chosen to expose them.


TIMESTAMP_LITERALS = [
    "1969-12-31 23:59:59.999999",
    "1970-01-01 00:00:00",
    "0001-01-01 00:00:00",
    "9999-12-31 23:59:59.999999",
    "2017-03-12 02:30:00",  # does not exist in America/Los_Angeles
    "2017-11-05 01:30:00",  # exists twice in America/Los_Angeles
    "1900-01-01 00:00:00",  # before standard time zones
]


@pytest.mark.parametrize(
    ("zone", "ansi"),
    [(zone, ansi) for zone in ZONES for ansi in ("true", "false") if zone != "UTC" or ansi == "true"],
)
def test_temporal_transforms_ignore_the_session_time_zone(spark: SparkSession, zone: str, ansi: str) -> None:
    transforms: list[Transform[Any, Any]] = [
        YearTransform(),
        MonthTransform(),
        DayTransform(),
        HourTransform(),
        BucketTransform(1000),
    ]
    literals = []
    for index, literal in enumerate(TIMESTAMP_LITERALS):
        # The explicit offset and the NTZ type make the values themselves zone-free.
        literals.append(F.expr(f"TIMESTAMP_LTZ'{literal}+00:00'").alias(f"tz_{index}"))
        literals.append(F.expr(f"TIMESTAMP_NTZ'{literal}'").alias(f"ntz_{index}"))
        literals.append(F.expr(f"DATE'{literal[:10]}'").alias(f"d_{index}"))
    columns = []
    for index in range(len(TIMESTAMP_LITERALS)):
        for number, transform in enumerate(transforms):
            tz, ntz, date = F.col(f"tz_{index}"), F.col(f"ntz_{index}"), F.col(f"d_{index}")
            columns.append(
                partition_value_column(transform, tz, TimestamptzType()).alias(f"tz_{index}_{number}")
            )
            columns.append(
                partition_value_column(transform, ntz, TimestampType()).alias(f"ntz_{index}_{number}")
            )
            if not isinstance(transform, HourTransform):
                columns.append(
                    partition_value_column(transform, date, DateType()).alias(f"d_{index}_{number}")
                )
    with session_conf(spark, {"spark.sql.session.timeZone": zone, "spark.sql.ansi.enabled": ansi}):
        # Materialized, so that the transforms run as generated code instead of being
        # folded into constants on the driver.
        values = spark.range(1).select(*literals).localCheckpoint(eager=True)
        row = values.select(*columns).first()
    assert row is not None
    for index, literal in enumerate(TIMESTAMP_LITERALS):
        naive = dt.datetime.fromisoformat(literal)
        for number, transform in enumerate(transforms):
            expected = transform.transform(TimestampType())(naive)
            assert row[f"tz_{index}_{number}"] == expected, (literal, transform, zone)
            assert row[f"ntz_{index}_{number}"] == expected, (literal, transform, zone)
            if not isinstance(transform, HourTransform):
                expected_for_date = transform.transform(DateType())(naive.date())
                assert row[f"d_{index}_{number}"] == expected_for_date, (literal, transform, zone)


def _truncate(column: Column, width: int, source_type: IcebergType) -> Column:
    return partition_value_column(TruncateTransform(width), column, source_type)


def _transform_at(
    k: int, transform: Transform[Any, Any], source_type: IcebergType
) -> Callable[[list[Column]], Column]:
    """The partition values of column ``k`` of the evaluated row."""
    return lambda c: partition_value_column(transform, c[k], source_type)


def _hash_at(k: int, source_type: IcebergType) -> Callable[[list[Column]], Column]:
    return lambda c: murmur3_hash_column(c[k], source_type)


def _identity_is_source_at(k: int, source_type: IcebergType) -> Callable[[list[Column]], Column]:
    # Compared inside Spark: collected timestamps would pass through the local zone.
    return lambda c: partition_value_column(IdentityTransform(), c[k], source_type).eqNullSafe(c[k])


@pytest.mark.parametrize("ansi", ["true", "false"])
def test_integer_truncation_wraps_like_java_in_both_ansi_modes(spark: SparkSession, ansi: str) -> None:
    cases = [
        (IntegerType(), INT_MIN, 10, 2147483646),
        (IntegerType(), INT_MIN + 1, 7, java_truncate(INT_MIN + 1, 7, 32)),
        (IntegerType(), 5, INT_MAX, -2147483647),  # Java's int overflow for widths over 2**30
        (IntegerType(), -5, 10, -10),
        (LongType(), LONG_MIN, 10, 9223372036854775806),
        (LongType(), LONG_MIN, INT_MAX, java_truncate(LONG_MIN, INT_MAX, 64)),
        (LongType(), LONG_MAX, INT_MAX, java_truncate(LONG_MAX, INT_MAX, 64)),
        (LongType(), -1, 3, -3),
    ]
    columns = {
        f"case_{k}": _transform_at(k, TruncateTransform(width), source_type)
        for k, (source_type, _, width, _) in enumerate(cases)
    }
    row = tuple(value for _, value, _, _ in cases)
    result = evaluate(spark, [t for t, _, _, _ in cases], [row], columns, {"spark.sql.ansi.enabled": ansi})[0]
    assert [result[f"case_{k}"] for k in range(len(cases))] == [expected for *_, expected in cases]


def test_truncate_counts_code_points_and_bytes(spark: SparkSession) -> None:
    strings = evaluate_one(
        spark,
        StringType(),
        ["a\U0001f600bc", "\U0001f600\U0001f600"],
        lambda c: _truncate(c, 2, StringType()),
    )
    assert strings == ["a\U0001f600", "\U0001f600\U0001f600"]
    assert evaluate_one(
        spark, BinaryType(), [b"\xf0\x9f\x98\x80"], lambda c: _truncate(c, 2, BinaryType())
    ) == [b"\xf0\x9f"]


@pytest.mark.parametrize("ansi", ["true", "false"])
@pytest.mark.parametrize("source_type", [DecimalType(3, 0), DecimalType(38, 2), DecimalType(38, 10)], ids=str)
def test_decimal_truncation_below_the_precision_fails_clearly(
    spark: SparkSession, source_type: DecimalType, ansi: str
) -> None:
    smallest = unscaled_to_decimal(-(10**source_type.precision - 1), source_type.scale)
    conf = {"spark.sql.ansi.enabled": ansi}
    with pytest.raises(Exception) as raised:
        evaluate_one(spark, source_type, [smallest], lambda c: _truncate(c, 10, source_type), conf)
    assert find_error_code(str(raised.value)) is PartitionSpecError
    assert str(smallest) in str(raised.value)


def test_decimal_truncation_near_the_precision_limit(spark: SparkSession) -> None:
    """decimal(38, 10) goes through an Arrow UDF, the others natively; all exact."""
    for source_type in [DecimalType(38, 10), DecimalType(38, 6), DecimalType(37, 37)]:
        largest = 10**source_type.precision - 1
        values = [
            unscaled_to_decimal(u, source_type.scale) for u in [largest, -largest + 10, -largest + 9, -15, 15]
        ]
        results = evaluate_one(
            spark, source_type, [*values, None], partial(_truncate, width=10, source_type=source_type)
        )
        truncate: TruncateTransform[Any] = TruncateTransform(10)
        expected = [truncate.transform(source_type)(v) for v in values]
        assert results == [*expected, None], source_type


# Errors, nulls and the rest.


@pytest.mark.parametrize(
    ("transform", "source_type"),
    [
        (HourTransform(), DateType()),
        (YearTransform(), StringType()),
        (DayTransform(), LongType()),
        (BucketTransform(4), FloatType()),
        (BucketTransform(4), DoubleType()),
        (BucketTransform(4), BooleanType()),
        (BucketTransform(4), TimestampNanoType()),
        (TruncateTransform(3), FixedType(4)),
        (TruncateTransform(3), UUIDType()),
        (TruncateTransform(3), DateType()),
        (IdentityTransform(), TimestampNanoType()),
    ],
    ids=str,
)
def test_unsupported_combinations_name_transform_type_and_choices(
    transform: Transform[Any, Any], source_type: IcebergType
) -> None:
    with pytest.raises(PartitionSpecError) as raised:
        partition_value_column(transform, F.col("v"), source_type)
    message = str(raised.value)
    assert str(transform) in message and str(source_type) in message and "accepts" in message


def test_murmur3_hash_column_rejects_unbucketable_types() -> None:
    with pytest.raises(PartitionSpecError, match="bucket accepts int, long"):
        murmur3_hash_column(F.col("v"), DoubleType())


def test_void_is_a_typed_null(spark: SparkSession) -> None:
    df = spark.range(2).select(F.col("id").alias("v"))
    out = df.select(partition_value_column(VoidTransform(), F.col("v"), LongType()).alias("p"))
    assert out.schema["p"].dataType == T.LongType()
    assert [r["p"] for r in out.collect()] == [None, None]


def test_result_types(spark: SparkSession) -> None:
    df = spark.createDataFrame([(1, "x", dt.date(2020, 1, 1))], "i int, s string, d date")
    out = df.select(
        partition_value_column(BucketTransform(8), F.col("s"), StringType()).alias("b"),
        partition_value_column(DayTransform(), F.col("d"), DateType()).alias("day"),
        partition_value_column(TruncateTransform(3), F.col("s"), StringType()).alias("t"),
        partition_value_column(IdentityTransform(), F.col("i"), IntegerType()).alias("id"),
    )
    assert [f.dataType for f in out.schema.fields] == [
        T.IntegerType(),
        T.IntegerType(),
        T.StringType(),
        T.IntegerType(),
    ]


def test_malformed_uuid_text_fails_with_the_value(spark: SparkSession) -> None:
    with pytest.raises(Exception) as raised:
        evaluate_one(spark, UUIDType(), ["not-a-uuid"], lambda c: murmur3_hash_column(c, UUIDType()))
    assert find_error_code(str(raised.value)) is BadRecordError
    assert "not-a-uuid" in str(raised.value)


def test_misaligned_decimal_buffers_are_copied_before_rust_sees_them() -> None:
    from pyiceberg_core import transform

    unscaled = [1420, -1, 0]
    data = bytearray(1) + b"".join(u.to_bytes(16, "little", signed=True) for u in unscaled)
    misaligned = pa.Array.from_buffers(pa.decimal128(9, 2), 3, [None, pa.py_buffer(data)[1:]])
    assert misaligned.buffers()[1].address % 16 != 0
    realigned = aligned(misaligned)
    assert realigned.buffers()[1].address % 16 == 0
    assert realigned.to_pylist() == misaligned.to_pylist()
    expected = [BucketTransform(16).transform(DecimalType(9, 2))(v) for v in misaligned.to_pylist()]
    assert transform.bucket(realigned, 16).to_pylist() == expected
