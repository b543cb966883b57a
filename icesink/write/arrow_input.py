"""The Arrow batches Spark hands a write task, and Spark's byte check on each of their rows.

Spark caps every Arrow batch it sends a Python worker twice: at
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000 by default) and at
``spark.sql.execution.arrow.maxBytesPerBatch`` bytes (64 MiB by default). It checks the byte
cap after every row, by asking each column's Arrow vector for its size, which for rows
as wide as the reference workload's is a large share of what the JVM spends on each row on
its way to Python (``benchmarks/README.md``, "Spark's byte check on every row"). A byte cap of exactly
``Int.MaxValue`` turns the check off; the row cap then bounds each batch alone.

The check can only end a batch early when its rows are wide. The write tasks measure
the widest Arrow batch they receive, in bytes per row (:class:`InputWidth`), and report
it with their rows. For the sink's next write job the driver turns the check off when
that width times the row cap, times :data:`HEADROOM`, is still within the byte cap
(:func:`byte_check_skipped`): rows would have to grow that many times wider between two
batches for a batch to pass the cap. A sink's first batch, and every batch after one
whose rows came closer, keep Spark's check.

The cap is set as a local property of the thread that runs the job, which is how Spark
hands SQL settings to its tasks: the session's configuration and its other queries are
left as they are, and a value the session sets itself still wins. Under Spark Connect
(no local properties to set) the check stays on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from icesink.write.split import arrow_bytes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch"
MAX_RECORDS_PER_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
UNCHECKED = 2**31 - 1
"""The byte cap at which Spark does not check it (``Int.MaxValue``)."""
HEADROOM = 4
"""How many times wider than the widest rows of the last batch the rows may grow."""

_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}


class InputWidth:
    """The widest Arrow batch a task received, in bytes per row (rounded up; 0 before any row)."""

    def __init__(self) -> None:
        self.row_bytes = 0

    def reading(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """``batches`` as they are, measured on the way."""
        for batch in batches:
            if batch.num_rows:
                self.row_bytes = max(self.row_bytes, -(-arrow_bytes(batch) // batch.num_rows))
            yield batch


@contextlib.contextmanager
def byte_check_skipped(spark: SparkSession, row_bytes: int) -> Iterator[None]:
    """Run the write job of this block without Spark's per-row byte check, when ``row_bytes`` allows.

    Args:
        spark: The session the job runs on.
        row_bytes: The widest rows of the sink's previous batch (:class:`InputWidth`, the
            largest of its tasks'); 0 when unknown, which keeps the check.
    """
    if not _needless(spark, row_bytes):
        yield
        return
    from icesink.spark_session import local_property  # imports pyspark.sql, which the write tasks need not

    logger.info("the write runs without Spark's byte check on every row (the last rows: %d bytes)", row_bytes)
    with local_property(spark, MAX_BYTES_PER_BATCH, str(UNCHECKED)):
        yield


def _needless(spark: SparkSession, row_bytes: int) -> bool:
    """Whether rows ``row_bytes`` wide, :data:`HEADROOM` times over, keep every batch under the cap."""
    from icesink.spark_session import is_connect  # imports pyspark.sql, which the write tasks need not

    if row_bytes <= 0 or is_connect(spark) or spark.sparkContext.getLocalProperty(MAX_BYTES_PER_BATCH):
        return False  # unknown width, no local properties, or a cap this thread was given
    records = int(spark.conf.get(MAX_RECORDS_PER_BATCH) or 0)
    cap = parse_bytes(spark.conf.get(MAX_BYTES_PER_BATCH) or "")
    if records <= 0 or cap is None or cap >= UNCHECKED:
        return False  # the byte cap bounds the batches alone, or Spark does not check it anyway
    return records * row_bytes * HEADROOM <= cap


def parse_bytes(text: str) -> int | None:
    """A Spark size setting (``67108864b``, ``64m``, ``64mb``) in bytes; ``None`` if unreadable."""
    value = text.strip().lower()
    number = value.rstrip("bkmgtp")
    unit = value[len(number) :]
    unit = unit[:-1] if len(unit) == 2 and unit.endswith("b") else unit
    if not number.isdigit() or unit not in _BYTE_UNITS:
        logger.debug("%s=%r is not a size the sink reads: Spark's check stays on", MAX_BYTES_PER_BATCH, text)
        return None
    return int(number) * _BYTE_UNITS[unit]
