"""Exact shuffles: the rows given partition id ``p`` go to Spark partition ``p``, and nowhere else.

Spark's ``repartition(n, key)`` sends a row to partition ``pmod(hash(key), n)``, where
``hash`` is Spark's murmur3 with seed 42 (``HashPartitioning``). Bucket ids used as the
key do not map one to one: for 16 buckets over 16 partitions, six partitions receive two
buckets and six none. So the key is not the partition id ``p`` itself but the ``int``
whose Spark hash *is* ``p`` (:func:`icesink.route.murmur3.spark_hash_preimage`); for
``0 <= p < n``, ``pmod(p, n) == p``. The preimages are computed on the driver and
looked up per row in a literal array: one array access, no Python round trip, and
nothing of Spark's code or the session's settings changed.

Adaptive query execution leaves such a shuffle alone: ``repartition`` with an explicit
number of partitions is planned as a shuffle of origin ``REPARTITION_BY_NUM``, which
neither ``CoalesceShufflePartitions`` nor the skew rules (they take
``ENSURE_REQUIREMENTS``, ``REPARTITION_BY_COL`` and ``REBALANCE_*`` only) may change.
:func:`icesink.route.self_check.verify_partition_keys` checks both facts at start-up, under
the session's own settings.
"""

from __future__ import annotations

from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.route.murmur3 import spark_hash_preimage

__all__ = ["exact_repartition", "partition_key", "partition_keys"]


@lru_cache(maxsize=64)
def partition_keys(num_partitions: int) -> tuple[int, ...]:
    """The key of every partition id: Spark's ``hash()`` of ``partition_keys(n)[p]`` is ``p``."""
    return tuple(spark_hash_preimage(p) for p in range(num_partitions))


def partition_key(partition_ids: Column, num_partitions: int) -> Column:
    """The key that Spark's hash partitioning into ``num_partitions`` sends to ``partition_ids``.

    Args:
        partition_ids: An integer Column of values in ``[0, num_partitions)``, never null.
        num_partitions: The number of shuffle partitions.

    Returns:
        An ``IntegerType`` Column.
    """
    # One SQL literal instead of one F.lit() per partition: building 1,000 literals
    # through py4j takes about a second per batch, parsing the array a few milliseconds.
    keys = F.expr("array(" + ", ".join(str(k) for k in partition_keys(num_partitions)) + ")")
    return F.element_at(keys, partition_ids.cast("int") + 1)


def exact_repartition(df: DataFrame, partition_ids: Column, num_partitions: int) -> DataFrame:
    """``df`` shuffled into ``num_partitions`` partitions, row with id ``p`` into partition ``p``.

    The key is an expression, so the shuffle carries only ``df``'s own columns.

    Args:
        df: The rows.
        partition_ids: Per row, the partition it must go to (``0 <= id < num_partitions``).
        num_partitions: How many partitions the shuffle has; adaptive execution keeps them.
    """
    return df.repartition(num_partitions, partition_key(partition_ids, num_partitions))
