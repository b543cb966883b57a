"""Skew: spread a partition value far above the target file size over several write tasks.

With the bucket shuffle, every row of a bucket goes to one task; a bucket that holds most
of a batch would make that task write it all, file after file, while the others idle.
A *hot* partition value (one full partition tuple, e.g. one day of one bucket) is
therefore given ``s`` extra shuffle partitions of its own, after the bucket partitions,
and its rows are spread over them by a hash of their columns. Every such task still
receives rows of exactly one bucket, and each gets at least :data:`SPLIT_SHARE_FACTOR`
times the target file size by estimate, so splitting does not make small files: each
task writes one full file or more, and at most one tail.

Knowing which values are hot takes a count per partition value of *this* batch, which
costs a Spark job (another scan of the batch). It is run only when it can pay off
(:func:`needs_measurement`): on the first batch a sink routes in this process when the
table already holds data (a restart may face a backlog), and afterwards only when the
previous batch had a partition value of at least :data:`MEASURE_FACTOR` times the target.
Bytes are estimated as rows times the on-disk bytes per row of the previous batch (or of
the table, from its snapshot summary). The first batch into an empty table has no such
estimate and is not split.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from icesink.write.layout import BucketLayout
from icesink.write.messages import CONTENT_DATA, DataFileMessage

__all__ = [
    "MEASURE_FACTOR",
    "RETELL_AFTER",
    "SPLIT_SHARE_FACTOR",
    "BatchProfile",
    "HotValue",
    "RoutingHistory",
    "min_rows_to_split",
    "needs_measurement",
    "plan_splits",
    "scattered_bucket",
    "table_bytes_per_row",
]

SPLIT_SHARE_FACTOR = 1.5
"""Least estimated bytes of one task's share of a split value, in target file sizes."""
MEASURE_FACTOR = 2.0
"""A previous batch value this many target sizes large makes the next batch be measured."""
RETELL_AFTER = 15
"""Shuffled batches whose rows do not tell their Spark partitions, after one that did.

Telling costs a column through the shuffle (``benchmarks/README.md``, "Figures behind the
code's thresholds"). A batch whose rows came from
one partition is not shuffled, and tells at about no cost; one whose rows came from
several is followed by this many that do not tell, so a source that changes is noticed
within this many batches."""
MAX_SHARES_PER_VALUE = 64
MAX_EXTRA_PARTITIONS = 1024
MAX_HOT_VALUES = 64

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchProfile:
    """What the files of a written batch tell about the next one.

    Attributes:
        rows: Rows written.
        file_bytes: On-disk bytes of the data files.
        largest_value_bytes: On-disk bytes of the largest partition value.
        files: Data files written.
        rows_in_one_partition: Every row came from the same Spark partition of the batch
            (as the write tasks saw it; ``False`` when they were not told). A file source
            splits a file into byte ranges, about one per core, and a Parquet file of one
            row group gives every row to the range holding the row group's middle, the
            others none: a shuffle would then only cost. The next batch is coalesced into
            one task instead, whose rows tell again; if they came from several partitions
            after all, that task wrote them slower than a shuffle, with the same files,
            and the batch after it is shuffled.
        input_row_bytes: The widest Arrow batch Spark handed a write task, in bytes per
            row (:mod:`icesink.write.arrow_input`); 0 when unknown.
    """

    rows: int
    file_bytes: int
    largest_value_bytes: int
    files: int
    rows_in_one_partition: bool = False
    input_row_bytes: int = 0

    @property
    def bytes_per_row(self) -> float | None:
        return self.file_bytes / self.rows if self.rows else None

    @classmethod
    def from_files(
        cls,
        files: Sequence[DataFileMessage],
        source_partitions: Collection[int] = (),
        input_row_bytes: int = 0,
    ) -> BatchProfile:
        by_value: dict[tuple[Any, ...], int] = defaultdict(int)
        for f in files:
            by_value[f.partition] += f.file_size_bytes
        return cls(
            rows=sum(f.record_count for f in files),
            file_bytes=sum(f.file_size_bytes for f in files),
            largest_value_bytes=max(by_value.values(), default=0),
            files=len(files),
            rows_in_one_partition=len(source_partitions) == 1,
            input_row_bytes=input_row_bytes,
        )


class RoutingHistory:
    """The profile of the last non-empty batch a sink wrote (one history per sink id)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: BatchProfile | None = None
        self._untold = RETELL_AFTER  # batches since one whose rows told their Spark partitions
        self._scattered: str | None = None

    def tell_source_partitions(self) -> bool:
        """Whether a shuffled batch's rows should tell the Spark partitions they came from:
        the first batch, then once every :data:`RETELL_AFTER` batches that did not."""
        with self._lock:
            return self._untold >= RETELL_AFTER

    @property
    def last(self) -> BatchProfile | None:
        with self._lock:
            return self._last

    @property
    def scattered(self) -> str | None:
        """How a bucket shuffle of this sink once failed to give a bucket to one task, if it did."""
        with self._lock:
            return self._scattered

    def record(
        self,
        files: Sequence[DataFileMessage],
        source_partitions: Collection[int] = (),
        input_row_bytes: int = 0,
        buckets: BucketLayout | None = None,
    ) -> None:
        """Remember what a batch wrote, the Spark partitions its rows came from (as far as
        known) and how wide they came (:class:`BatchProfile`); an empty batch tells nothing
        and is ignored. With ``buckets``, the batch came through a bucket shuffle that
        should have given each bucket to one task: one written by several is remembered
        (:attr:`scattered`) and logged."""
        if not files:
            return
        profile = BatchProfile.from_files(files, source_partitions, input_row_bytes)
        scattered = scattered_bucket(files, buckets) if buckets is not None else None
        with self._lock:
            self._last = profile
            self._untold = 0 if source_partitions else self._untold + 1
            if scattered is not None and self._scattered is None:
                self._scattered = scattered
                logger.warning(
                    "the bucket shuffle gave %s: Spark's bucket hash or shuffle is not what the sink "
                    "expects (a Spark release that changed them?); the files are right, but more. "
                    "Later batches of this sink are shuffled by hash; distribution-mode=hash does so "
                    "from the start",
                    scattered,
                )


def scattered_bucket(files: Sequence[DataFileMessage], layout: BucketLayout) -> str | None:
    """A bucket (shuffle partition id of ``layout``) whose data files several tasks wrote, if any.

    The partition values are the write tasks' own (Iceberg's transforms), so a bucket
    written by two tasks shows that Spark's bucket ids, which chose the tasks, differ
    from Iceberg's, or that the shuffle did not keep partition id == Spark partition.
    """
    tasks: dict[int, set[int]] = defaultdict(set)
    for f in files:
        if f.content == CONTENT_DATA:
            tasks[layout.partition_of(f.partition)].add(f.task_id)
    wrong = sorted((pid, sorted(t)) for pid, t in tasks.items() if len(t) > 1)
    if not wrong:
        return None
    pid, by = wrong[0]
    return f"bucket partition {pid} to {len(by)} tasks {by[:4]} ({len(wrong)} of {len(tasks)} buckets so)"


@dataclass(frozen=True)
class HotValue:
    """A partition value whose rows are spread over several shuffle partitions.

    Attributes:
        value_hash: Spark's ``xxhash64`` of the partition columns, which identifies the value.
        partition: The partition values, for logs.
        rows: Its rows in this batch.
        shares: Shuffle partitions it is spread over.
        first_partition: The first of them; they are consecutive.
    """

    value_hash: int
    partition: tuple[Any, ...]
    rows: int
    shares: int
    first_partition: int


def table_bytes_per_row(summary: Mapping[str, str] | None) -> float | None:
    """On-disk bytes per row of a table, from its current snapshot's summary (``None``: no data)."""
    if not summary:
        return None
    try:
        size, records = int(summary["total-files-size"]), int(summary["total-records"])
    except (KeyError, ValueError):
        return None
    return size / records if size > 0 and records > 0 else None


def needs_measurement(last: BatchProfile | None, table_bpr: float | None, target_bytes: int) -> bool:
    """Whether to count this batch's rows per partition value before shuffling it.

    Args:
        last: The previous batch of this sink in this process, if any.
        table_bpr: The table's on-disk bytes per row, if it holds data.
        target_bytes: The target data file size.
    """
    if last is None:
        return table_bpr is not None
    return last.bytes_per_row is not None and last.largest_value_bytes >= MEASURE_FACTOR * target_bytes


def min_rows_to_split(bytes_per_row: float, target_bytes: int) -> int:
    """The fewest rows a value needs to be split in two shares."""
    return max(1, math.ceil(2 * SPLIT_SHARE_FACTOR * target_bytes / bytes_per_row))


def plan_splits(
    counts: Sequence[tuple[int, tuple[Any, ...], int]],
    bytes_per_row: float,
    target_bytes: int,
    first_partition: int,
) -> tuple[HotValue, ...]:
    """Decide which values are split and into how many shares.

    Args:
        counts: ``(value hash, partition values, rows)`` of the largest values of the batch.
        bytes_per_row: Estimated on-disk bytes per row.
        target_bytes: The target data file size.
        first_partition: The first shuffle partition after the bucket partitions.

    Returns:
        The values to split, largest first, each with at least two shares of at least
        :data:`SPLIT_SHARE_FACTOR` target sizes; at most :data:`MAX_HOT_VALUES` values,
        :data:`MAX_SHARES_PER_VALUE` shares each and :data:`MAX_EXTRA_PARTITIONS` in all.
    """
    share_bytes = SPLIT_SHARE_FACTOR * target_bytes
    hot: list[HotValue] = []
    extra = 0
    for value_hash, partition, rows in sorted(counts, key=lambda c: -c[2])[:MAX_HOT_VALUES]:
        shares = min(
            MAX_SHARES_PER_VALUE, MAX_EXTRA_PARTITIONS - extra, int(rows * bytes_per_row // share_bytes)
        )
        if shares < 2:
            continue
        hot.append(HotValue(value_hash, partition, rows, shares, first_partition + extra))
        extra += shares
    return tuple(hot)
