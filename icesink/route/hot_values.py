"""Hot partition values: found by counting rows per value, spread over partitions of their own.

The planning (which values, how many partitions each) is :mod:`icesink.route.skew`; this
module runs the count in Spark and builds the partition-id expression that spreads them.
"""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from icesink.route.skew import (
    MAX_HOT_VALUES,
    HotValue,
    RoutingHistory,
    min_rows_to_split,
    needs_measurement,
    plan_splits,
)

logger = logging.getLogger(__name__)

__all__ = ["count_hot_values", "salt_columns", "spread"]


def count_hot_values(
    df: DataFrame,
    partition_columns: list[Column],
    first_extra: int,
    history: RoutingHistory,
    table_bytes_per_row: float | None,
    target_file_size_bytes: int,
    log: tuple[int | None, str | None, str],
) -> tuple[HotValue, ...]:
    """Values of this batch to spread over several tasks; counts them when it may pay off.

    Args:
        df: The batch.
        partition_columns: Its partition values, as columns or expressions over ``df``.
        first_extra: The first shuffle partition after the buckets.
        history: What the sink's previous batches wrote.
        table_bytes_per_row: On-disk bytes per row of the table's data, if known.
        target_file_size_bytes: The target data file size.
        log: Batch id, sink id and table, for the log lines.
    """
    last = history.last
    if not needs_measurement(last, table_bytes_per_row, target_file_size_bytes):
        return ()
    bytes_per_row = (last.bytes_per_row if last is not None else None) or table_bytes_per_row
    assert bytes_per_row is not None
    names = [f"value_{i}" for i in range(len(partition_columns))]
    try:
        rows = (
            df.groupBy(*[c.alias(name) for c, name in zip(partition_columns, names, strict=True)])
            .agg(F.count(F.lit(1)).alias("rows"))
            .where(F.col("rows") >= min_rows_to_split(bytes_per_row, target_file_size_bytes))
            .select(F.xxhash64(*[F.col(c) for c in names]).alias("value_hash"), "rows", *names)
            .orderBy(F.desc("rows"))
            .limit(MAX_HOT_VALUES)
            .collect()
        )
    except Exception:  # a bad record (on-bad-record=fail) is reported by the write itself
        logger.warning(
            "batch %s of sink %s: counting rows per partition value of %s failed; not splitting",
            *log,
            exc_info=True,
        )
        return ()
    counts = [(r["value_hash"], tuple(r[c] for c in names), r["rows"]) for r in rows]
    hot = plan_splits(counts, bytes_per_row, target_file_size_bytes, first_extra)
    for value in hot:
        logger.info(
            "batch %s of sink %s: partition %s of %s has %d rows (~%d bytes): spread over %d tasks",
            log[0],
            log[1],
            value.partition,
            log[2],
            value.rows,
            int(value.rows * bytes_per_row),
            value.shares,
        )
    return hot


def spread(
    partition_ids: Column, hot: tuple[HotValue, ...], partition_columns: list[Column], salt: list[Column]
) -> Column:
    """Partition ids with the rows of each hot value spread over its own partitions by ``salt``.

    A hot value is recognised by the ``xxhash64`` of its partition tuple, the same hash
    the count computed; the rows of one value are spread by Spark's hash of their own
    columns (deterministic, so a retried shuffle task sends every row where it went
    before).
    """
    index = F.try_element_at(
        F.create_map(*[x for i, h in enumerate(hot) for x in (F.lit(h.value_hash).cast("long"), F.lit(i))]),
        F.xxhash64(*partition_columns),
    )
    firsts = F.expr("array(" + ", ".join(str(h.first_partition) for h in hot) + ")")
    shares = F.expr("array(" + ", ".join(str(h.shares) for h in hot) + ")")
    spread = F.element_at(firsts, index + 1) + F.pmod(F.hash(*salt), F.element_at(shares, index + 1))
    return F.when(index.isNull(), partition_ids).otherwise(spread)


def salt_columns(df: DataFrame) -> list[Column]:
    """The top-level primitive columns, whose hash spreads a hot value's rows."""
    nested = (T.ArrayType, T.MapType, T.StructType)
    return [F.col(_quoted(f.name)) for f in df.schema.fields if not isinstance(f.dataType, nested)]


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"
