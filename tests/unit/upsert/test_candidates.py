"""A batch's keys grouped by the partition values of their key-sourced fields, as pyiceberg computes them."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform, TruncateTransform
from pyiceberg.types import LongType, NestedField, StringType

from icesink.upsert.candidates import KeyCandidates

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=True),
    NestedField(3, "payload", StringType(), required=False),
    identifier_field_ids=[1, 2],
)


def test_keys_are_grouped_by_every_key_sourced_field_of_each_spec() -> None:
    specs = {
        0: PartitionSpec(PartitionField(1, 1000, BucketTransform(8), "id_bucket"), spec_id=0),
        1: PartitionSpec(
            PartitionField(3, 1000, IdentityTransform(), "payload"),  # not a key column: no constraint
            PartitionField(2, 1001, TruncateTransform(1), "region_trunc"),
            PartitionField(1, 1002, BucketTransform(4), "id_bucket"),
            spec_id=1,
        ),
    }
    rng = random.Random(5)
    ids = rng.sample(range(10**9), 3_000)
    regions = [rng.choice(["eu-west", "us-east", "ap-south", "eu-north"]) for _ in ids]
    keys = pa.table({"id": pa.array(ids, pa.int64()), "region": regions})
    candidates = KeyCandidates(keys, (1, 2), SCHEMA, specs)

    bucket8: Callable[[Any], Any] = BucketTransform(8).transform(LongType())
    bucket4: Callable[[Any], Any] = BucketTransform(4).transform(LongType())
    first: Callable[[Any], Any] = TruncateTransform(1).transform(StringType())
    for bucket in range(8):
        expected = sorted(i for i in ids if bucket8(i) == bucket)
        found = candidates.in_partition(0, (bucket,))
        assert sorted(found.column("id").to_pylist()) == expected
        assert expected  # every bucket holds some of 3,000 keys
    seen = 0
    for letter in "eua":
        for bucket in range(4):
            pairs = zip(ids, regions, strict=True)
            in_group = sorted((i, r) for i, r in pairs if first(r) == letter and bucket4(i) == bucket)
            found = candidates.in_partition(1, (None, letter, bucket))
            assert sorted(zip(*found.to_pydict().values(), strict=True)) == in_group
            seen += len(in_group)
    assert seen == len(ids)
    assert candidates.in_partition(1, (None, "x", 0)).num_rows == 0
