"""Start-up self-checks of the routing step, run once per Spark application.

* :func:`verify_bucket_function`: the bucket expressions of :mod:`icesink.route.transforms`
  against the hash values published in the Iceberg spec (Appendix B, "32-bit Hash
  Requirements"), through the generated code and Arrow UDFs that route real batches.
* :func:`verify_partition_keys`: the exact shuffle of :mod:`icesink.route.shuffle` sends
  partition id ``p`` to Spark partition ``p`` under the session's current settings
  (adaptive execution included).

:mod:`icesink.route.self_check_runs` runs them once per Spark application, waiting for
them or in the background.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.transforms import BucketTransform
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from icesink.errors import SelfCheckError
from icesink.route.shuffle import exact_repartition
from icesink.route.transforms import TIME_SUPPORTED, murmur3_hash_column, partition_value_column

__all__ = [
    "BUCKET_HASH_VECTORS",
    "HashVector",
    "code_path",
    "vectors_for",
    "verify_bucket_function",
    "verify_partition_keys",
]

logger = logging.getLogger(__name__)

_MAX_LONG_DIGITS = 18


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

_SELF_CHECK_BUCKET_COUNT = 1000


def verify_bucket_function(spark: SparkSession, vectors: Sequence[HashVector] = BUCKET_HASH_VECTORS) -> None:
    """Check, once at start-up, that the bucket expressions hash as Iceberg Java does.

    Runs one small Spark job that computes every vector's raw hash with
    :func:`murmur3_hash_column` and its bucket id with :func:`partition_value_column`,
    through the code paths (generated code, Arrow UDFs) that route real batches. Time
    vectors are skipped unless ``spark.sql.timeType.enabled`` is true.

    Args:
        spark: The session the sink runs in; none of its settings are changed.
        vectors: Values with their known hashes; the spec's by default.

    Raises:
        SelfCheckError: A hash or bucket id differs from the expected one, or the check
            could not run at all.
    """
    time_enabled = TIME_SUPPORTED and spark.conf.get("spark.sql.timeType.enabled", "false") == "true"
    checked = [v for v in vectors if time_enabled or not isinstance(v.source_type, TimeType)]
    # One row per vector and one column per type, so that each type's (large) hash
    # expression is planned once however many values of that type are checked.
    types = list(dict.fromkeys(str(v.source_type) for v in checked))
    type_of = {name: next(v.source_type for v in checked if str(v.source_type) == name) for name in types}
    rows = _hashes_and_buckets(spark, checked, types, type_of)
    mismatches = _mismatches(checked, types, rows)
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
    logger.info("bucket hash self-check passed for %d values of %d types", len(checked), len(types))


def _hashes_and_buckets(
    spark: SparkSession, checked: list[HashVector], types: list[str], type_of: dict[str, IcebergType]
) -> dict[int, Row]:
    """Row ``i``: vector ``i``'s hash and bucket id, in the columns of its type, computed by Spark.

    Raises:
        SelfCheckError: The Spark job failed.
    """
    row_id = F.col("id")
    try:
        literals = []
        for column, name in enumerate(types):
            value = F.lit(None)
            for index, vector in enumerate(checked):
                if str(vector.source_type) == name:
                    value = F.when(row_id == index, F.expr(vector.sql_literal)).otherwise(value)
            literals.append(value.alias(f"value_{column}"))
        results = [row_id]
        for column, name in enumerate(types):
            source = F.col(f"value_{column}")
            bucket: BucketTransform[Any] = BucketTransform(_SELF_CHECK_BUCKET_COUNT)
            results.append(murmur3_hash_column(source, type_of[name]).alias(f"hash_{column}"))
            results.append(partition_value_column(bucket, source, type_of[name]).alias(f"bucket_{column}"))
        # Materialized first, so that the optimizer cannot fold the literals into the
        # expressions and evaluate them on the driver: the check runs the generated
        # code that executors run on real batches.
        values = spark.range(len(checked)).select(row_id, *literals).localCheckpoint(eager=True)
        return {row["id"]: row for row in values.select(*results).collect()}
    except Exception as e:
        raise SelfCheckError(
            "the bucket hash self-check could not run",
            hint="see the cause; bucketed tables cannot be written safely until it passes",
        ) from e


def _mismatches(
    checked: list[HashVector], types: list[str], rows: dict[int, Row]
) -> list[tuple[HashVector, str, int, int | None]]:
    """``(vector, what, expected, actual)`` of every hash and bucket id that differs."""
    mismatches: list[tuple[HashVector, str, int, int | None]] = []
    for index, vector in enumerate(checked):
        column = types.index(str(vector.source_type))
        actual_hash = rows[index][f"hash_{column}"]
        if actual_hash != vector.expected_hash:
            mismatches.append((vector, "hash", vector.expected_hash, actual_hash))
        expected_bucket = (vector.expected_hash & 0x7FFFFFFF) % _SELF_CHECK_BUCKET_COUNT
        actual_bucket = rows[index][f"bucket_{column}"]
        if actual_bucket != expected_bucket:
            mismatches.append((vector, f"bucket[{_SELF_CHECK_BUCKET_COUNT}]", expected_bucket, actual_bucket))
    return mismatches


SELF_CHECK_PARTITIONS = 37
"""Partitions of the shuffle self-check: not a power of two, so ``pmod`` really reduces."""


def verify_partition_keys(spark: SparkSession, num_partitions: int = SELF_CHECK_PARTITIONS) -> None:
    """Check that the exact shuffle sends every partition id to its own Spark partition.

    Runs one small shuffle of ``num_partitions`` rows, one per partition id, under the
    session's settings as they are: had adaptive execution coalesced the partitions, or
    Spark's hash partitioning changed, some row would land elsewhere.

    Args:
        spark: The session the sink runs in; none of its settings are changed.
        num_partitions: Partitions of the check's shuffle.

    Raises:
        SelfCheckError: A row landed in another partition, or the check could not run.
    """
    try:
        ids = spark.range(num_partitions, numPartitions=2).select(F.col("id").cast("int").alias("pid"))
        shuffled = exact_repartition(ids, F.col("pid"), num_partitions)
        rows = shuffled.select(F.spark_partition_id().alias("partition"), "pid").collect()
    except Exception as e:
        raise SelfCheckError(
            "the bucket shuffle self-check could not run",
            hint="see the cause; distribution-mode=bucket cannot be used until it passes",
        ) from e
    landed = {row["pid"]: row["partition"] for row in rows}
    wrong = {pid: part for pid, part in landed.items() if pid != part}
    missing = sorted(set(range(num_partitions)) - set(landed))
    if wrong or missing:
        raise SelfCheckError(
            f"the bucket shuffle sends partition ids to other partitions: {dict(sorted(wrong.items())[:8])}"
            f" (id: partition), missing ids {missing[:8]}",
            hint="Spark's hash partitioning differs from murmur3 seed 42 with pmod, or adaptive execution "
            "coalesced a repartition with an explicit number; use distribution-mode=hash meanwhile",
            num_partitions=num_partitions,
        )
    logger.info("bucket shuffle self-check passed for %d partitions", num_partitions)


def vectors_for(source_types: Iterable[IcebergType]) -> list[HashVector]:
    """The spec's vectors that take the same code paths as buckets of ``source_types``.

    int and long share one path, fixed and binary another; decimals take one path up to
    precision 18 and another above it.
    """
    wanted = {code_path(t) for t in source_types}
    return [v for v in BUCKET_HASH_VECTORS if code_path(v.source_type) in wanted]


def code_path(source_type: IcebergType) -> str:
    """The code path of the bucket expressions that hashes values of ``source_type``."""
    if isinstance(source_type, (IntegerType, LongType)):
        return "integer"
    if isinstance(source_type, (FixedType, BinaryType)):
        return "bytes"
    if isinstance(source_type, DecimalType):
        return "decimal" if source_type.precision <= _MAX_LONG_DIGITS else "wide decimal"
    return type(source_type).__name__
