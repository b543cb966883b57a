"""The exact shuffle: partition id p lands in Spark partition p, whatever adaptive execution does."""

from __future__ import annotations

import struct

import mmh3
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from icesink.errors import SelfCheckError
from icesink.route import self_check, self_check_runs
from icesink.route.murmur3 import ZERO_SEED_PREFIX, spark_hash_preimage
from icesink.route.shuffle import exact_repartition, partition_keys
from tests.support.spark_conf import session_conf


def spark_int_hash(value: int) -> int:
    """Spark's ``hash()`` of an int: murmur3 x86 32-bit of its 4 little-endian bytes, seed 42."""
    return mmh3.hash(struct.pack("<i", value), 42)


def aqe(advisory: str) -> dict[str, str]:
    return {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": advisory,
    }


def landing(df: DataFrame) -> dict[int, set[int]]:
    """Spark partition -> the partition ids of the rows in it."""
    rows = df.select(F.spark_partition_id().alias("partition"), "pid").distinct().collect()
    landed: dict[int, set[int]] = {}
    for row in rows:
        landed.setdefault(row["partition"], set()).add(row["pid"])
    return landed


@pytest.mark.parametrize("value", [0, 1, 15, 16, 4095, 2**31 - 1, -1, -(2**31), 123456789])
def test_preimage_hashes_to_the_value(value: int) -> None:
    assert spark_int_hash(spark_hash_preimage(value)) == value


def test_zero_seed_prefix_is_the_preimage_of_zero() -> None:
    assert spark_hash_preimage(0) == ZERO_SEED_PREFIX


def test_bucket_ids_as_keys_do_not_map_one_to_one() -> None:
    """Why the keys exist: Spark's own hash of bucket ids 0..15 fills only some of 16 partitions."""
    naive = {spark_int_hash(b) % 16 for b in range(16)}
    assert len(naive) < 16
    exact = [spark_int_hash(k) % 16 for k in partition_keys(16)]
    assert exact == list(range(16))


def test_keys_agree_with_spark_hash(spark: SparkSession) -> None:
    keys = partition_keys(300)
    rows = spark.createDataFrame([(p, k) for p, k in enumerate(keys)], "p int, k int")
    hashed = {r["p"]: r["h"] for r in rows.select("p", F.hash("k").alias("h")).collect()}
    assert hashed == {p: p for p in range(300)}


@pytest.mark.parametrize("advisory", ["1b", "1g"])
def test_every_partition_id_lands_in_its_partition_under_aqe(spark: SparkSession, advisory: str) -> None:
    n = 23
    with session_conf(spark, aqe(advisory)):
        ids = spark.range(0, 4000, numPartitions=3).select((F.col("id") % n).cast("int").alias("pid"), "id")
        shuffled = exact_repartition(ids, F.col("pid"), n)
        assert landing(shuffled) == {p: {p} for p in range(n)}
        # Control: Spark's plain repartition by the id is coalesced under these settings.
        plain = landing(ids.repartition(F.col("pid")))
        assert plain != {p: {p} for p in range(n)}


def test_shuffle_self_check_passes(spark: SparkSession) -> None:
    self_check.verify_partition_keys(spark, 11)


def test_shuffle_self_check_fails_for_a_naive_shuffle(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    def naive(df: DataFrame, partition_ids: object, num_partitions: int) -> DataFrame:
        return df.repartition(num_partitions, F.col("pid"))

    monkeypatch.setattr(self_check, "exact_repartition", naive)
    with pytest.raises(SelfCheckError, match="sends partition ids to other partitions"):
        self_check.verify_partition_keys(spark, 16)


def test_self_checks_run_once_per_application_and_type_path(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.types import DateType, IntegerType, LongType

    calls: list[object] = []
    monkeypatch.setattr(self_check_runs, "_checked", set())
    monkeypatch.setattr(self_check, "verify_bucket_function", lambda s, v: calls.append(tuple(v)))
    monkeypatch.setattr(self_check, "verify_partition_keys", lambda s: calls.append("shuffle"))
    self_check_runs.ensure_self_checks(spark, [IntegerType()], shuffle=False)
    self_check_runs.ensure_self_checks(spark, [LongType()], shuffle=True)  # same path as int
    self_check_runs.ensure_self_checks(spark, [IntegerType(), DateType()], shuffle=True)
    assert calls[0] == tuple(
        v for v in self_check.BUCKET_HASH_VECTORS if str(v.source_type) in {"int", "long"}
    )
    assert calls[1] == "shuffle"
    assert calls[2] == tuple(v for v in self_check.BUCKET_HASH_VECTORS if str(v.source_type) == "date")
    assert len(calls) == 3


def test_self_checks_due_together_both_run_and_only_the_passing_one_is_remembered(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from pyiceberg.types import IntegerType

    calls: list[tuple[str, bool]] = []

    def wrong_hash(session: SparkSession, vectors: object) -> None:
        calls.append(("hash", threading.current_thread() is threading.main_thread()))
        raise SelfCheckError("the bucket hash differs")

    def shuffle(session: SparkSession) -> None:
        calls.append(("shuffle", threading.current_thread() is threading.main_thread()))

    monkeypatch.setattr(self_check_runs, "_checked", set())
    monkeypatch.setattr(self_check, "verify_bucket_function", wrong_hash)
    monkeypatch.setattr(self_check, "verify_partition_keys", shuffle)
    with pytest.raises(SelfCheckError, match="the bucket hash differs"):
        self_check_runs.ensure_self_checks(spark, [IntegerType()], shuffle=True)
    # Both ran, the hash check in a thread of its own, at the same time as the shuffle check.
    assert sorted(calls) == [("hash", False), ("shuffle", True)]
    calls.clear()
    monkeypatch.setattr(self_check, "verify_bucket_function", lambda s, v: calls.append(("hash", True)))
    self_check_runs.ensure_self_checks(spark, [IntegerType()], shuffle=True)
    assert calls == [("hash", True)]  # the shuffle passed before: not checked again


def test_real_self_checks_due_together_report_the_failing_shuffle(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.types import IntegerType

    def naive(df: DataFrame, partition_ids: object, num_partitions: int) -> DataFrame:
        return df.repartition(num_partitions, F.col("pid"))

    monkeypatch.setattr(self_check_runs, "_checked", set())
    monkeypatch.setattr(self_check, "exact_repartition", naive)
    with pytest.raises(SelfCheckError, match="sends partition ids to other partitions"):
        self_check_runs.ensure_self_checks(spark, [IntegerType()], shuffle=True)
    application = self_check_runs.application_id(spark)
    assert self_check_runs._checked == {(application, "integer")}  # the hash passed; the shuffle is due again
