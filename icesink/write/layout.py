"""Which shuffle partition a row's buckets give it: the partition id of the bucket shuffle.

A spec with one bucket field ``bucket[N]`` gives ``N`` partitions, bucket ``b`` in
partition ``b``. Several bucket fields combine in mixed radix, in spec order:
``bucket(2, i), bucket(3, s)`` gives 6 partitions, ``(b_i, b_s)`` in ``b_i * 3 + b_s``.
A bucket whose source column may be null has one more slot, ``N``, for the null
"bucket", so null rows never share a task with a real bucket. Other partition fields
(days, identity, truncate) do not enter the id: the task of a bucket writes all of them
through its fanout writer.

So that one batch cannot ask for millions of tasks, bucket fields after the first are
only combined while the product stays within :data:`MAX_BUCKET_PARTITIONS`; the fields
left out are then fanned out within a task, like days.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform
from pyspark.sql import Column
from pyspark.sql import functions as F

__all__ = ["MAX_BUCKET_PARTITIONS", "BucketLayout", "BucketSlot"]

MAX_BUCKET_PARTITIONS = 4096


@dataclass(frozen=True)
class BucketSlot:
    """One bucket field of the spec, as a digit of the partition id.

    Attributes:
        position: The field's position in the spec (and among the partition columns).
        num_buckets: Its bucket count.
        nullable: Whether its source may be null (then null takes slot ``num_buckets``).
    """

    position: int
    num_buckets: int
    nullable: bool

    @property
    def slots(self) -> int:
        return self.num_buckets + 1 if self.nullable else self.num_buckets


@dataclass(frozen=True)
class BucketLayout:
    """The bucket fields that make the partition id, in spec order."""

    slots: tuple[BucketSlot, ...]

    @property
    def num_partitions(self) -> int:
        """Partitions of the bucket shuffle: the product of the fields' slots."""
        return math.prod(s.slots for s in self.slots)

    @classmethod
    def for_spec(
        cls, spec: PartitionSpec, schema: Schema, max_partitions: int = MAX_BUCKET_PARTITIONS
    ) -> BucketLayout | None:
        """The layout of a spec's bucket fields; ``None`` when it has none."""
        chosen: list[BucketSlot] = []
        for position, field in enumerate(spec.fields):
            if not isinstance(field.transform, BucketTransform):
                continue
            slot = BucketSlot(position, field.transform.num_buckets, _nullable(schema, field.source_id))
            if chosen and math.prod(s.slots for s in chosen) * slot.slots > max_partitions:
                continue
            chosen.append(slot)
        return cls(tuple(chosen)) if chosen else None

    def partition_id(self, partition_columns: Sequence[Column]) -> Column:
        """The partition id of each row, from all partition-value columns in spec order."""
        pid: Column | None = None
        for slot in self.slots:
            bucket = partition_columns[slot.position]
            digit = F.coalesce(bucket, F.lit(slot.num_buckets)) if slot.nullable else bucket
            pid = digit if pid is None else pid * F.lit(slot.slots) + digit
        assert pid is not None
        return pid

    def partition_of(self, partition: Sequence[Any]) -> int:
        """The partition id of one partition tuple (spec order), as :meth:`partition_id` computes it."""
        pid = 0
        for slot in self.slots:
            bucket = partition[slot.position]
            pid = pid * slot.slots + (slot.num_buckets if bucket is None else int(bucket))
        return pid

    def describe(self) -> str:
        return " x ".join(f"bucket[{s.num_buckets}]{'+null' if s.nullable else ''}" for s in self.slots)


def _nullable(schema: Schema, source_id: int) -> bool:
    """Whether a source column can be null: it, or a struct it sits in, is optional."""
    name = schema.find_column_name(source_id)
    if name is None:
        return True
    parts = name.split(".")
    try:
        return any(not schema.find_field(".".join(parts[: i + 1])).required for i in range(len(parts)))
    except ValueError:  # a name with dots of its own: assume the worst, a null slot costs little
        return True
