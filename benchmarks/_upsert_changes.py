"""The upsert benchmark's table and its seeded stream of changes, with the expected state kept alongside.

Every row is a function of its key and its version (the batch that last wrote it; 0 for
the initial load), so the expected table is two arrays: which keys are alive and the
version of each. A batch of ``size`` changes holds, for distinct keys, 70% updates of
live keys, 20% inserts of new keys (the next unused ids) and 10% deletes of live keys
(the shares are options), in a seeded random order: the same seed gives the same
stream.
"""

from __future__ import annotations

import random
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import (
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

KEY = "id"
OP = "_op"
SCHEMA = Schema(
    NestedField(1, KEY, LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
    NestedField(4, "qty", IntegerType(), required=False),
    NestedField(5, "version", IntegerType(), required=False),
    NestedField(6, "updated_at", TimestamptzType(), required=False),
    identifier_field_ids=[1],
)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def partition_spec(buckets: int) -> PartitionSpec:
    """``bucket(buckets, id)``."""
    return PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=BucketTransform(buckets), name="id_bucket")
    )


def load_columns(version: int = 0) -> dict[str, str]:
    """Spark SQL expressions over ``id`` for the rows of the initial load (same values as :func:`rows`)."""
    return {
        "name": f"concat('n', id, 'v{version}')",
        "amount": f"CAST(id * 0.5 + {version} AS DOUBLE)",
        "qty": f"CAST((id + {version}) % 1000 AS INT)",
        "version": f"CAST({version} AS INT)",
        "updated_at": f"TIMESTAMP '{(EPOCH + timedelta(seconds=version)).isoformat()}'",
    }


def rows(ids: list[int], version: int) -> pa.Table:
    """The rows of ``ids`` at ``version`` (the table's columns, Arrow types of the table)."""
    return pa.table(
        {
            KEY: pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i}v{version}" for i in ids], pa.string()),
            "amount": pa.array([i * 0.5 + version for i in ids], pa.float64()),
            "qty": pa.array([(i + version) % 1000 for i in ids], pa.int32()),
            "version": pa.array([version] * len(ids), pa.int32()),
            "updated_at": pa.array(
                [EPOCH + timedelta(seconds=version)] * len(ids), pa.timestamp("us", tz="UTC")
            ),
        }
    )


@dataclass(frozen=True)
class Mix:
    """Shares of a batch's changes (the rest are deletes)."""

    updates: float = 0.7
    inserts: float = 0.2


class ChangeStream:
    """Seeded batches of changes over a table loaded with ids ``0 .. rows - 1`` at version 0.

    Args:
        rows: Rows of the initial load.
        seed: Seed of the stream.
        mix: Shares of updates and inserts.
    """

    def __init__(self, rows: int, seed: int, mix: Mix = Mix()) -> None:
        self._rng = random.Random(seed)
        self._mix = mix
        self.next_id = rows
        self.alive = bytearray(b"\x01") * rows
        self.versions = array("i", bytes(4 * rows))
        self.live = rows

    def batch(self, version: int, size: int) -> pa.Table:
        """The changes of batch ``version`` (>= 1): the table's columns plus ``_op`` (``u``, ``c``, ``d``)."""
        inserts = round(size * self._mix.inserts)
        updates = round(size * self._mix.updates)
        deletes = size - inserts - updates
        chosen = self._live_keys(updates + deletes)
        updated, deleted = chosen[:updates], chosen[updates:]
        new = list(range(self.next_id, self.next_id + inserts))
        self._grow(inserts)
        for key in updated + new:
            self.alive[key], self.versions[key] = 1, version
        for key in deleted:
            self.alive[key] = 0
        self.live += inserts - deletes
        upserts = rows(updated + new, version)
        ops = ["u"] * len(updated) + ["c"] * len(new)
        gone = pa.table({KEY: pa.array(deleted, pa.int64())})
        changes = pa.concat_tables(
            [upserts.append_column(OP, pa.array(ops, pa.string())), _deletes(gone, upserts.schema)]
        )
        order = list(range(changes.num_rows))
        self._rng.shuffle(order)
        return changes.take(pa.array(order, pa.int64()))

    def expected(self) -> pa.Table:
        """``id`` and ``version`` of every live row, by ``id``."""
        ids = [i for i in range(self.next_id) if self.alive[i]]
        versions = [self.versions[i] for i in ids]
        return pa.table({KEY: pa.array(ids, pa.int64()), "version": pa.array(versions, pa.int32())})

    def _live_keys(self, count: int) -> list[int]:
        """``count`` distinct live keys, uniformly at random (rejection: most keys are live)."""
        if count > self.live:
            raise ValueError(f"{count} changes of live keys asked, the table has {self.live} live rows")
        chosen: dict[int, None] = {}
        while len(chosen) < count:
            key = self._rng.randrange(self.next_id)
            if self.alive[key]:
                chosen[key] = None
        return list(chosen)

    def _grow(self, inserts: int) -> None:
        self.alive.extend(bytes(inserts))
        self.versions.extend(array("i", bytes(4 * inserts)))
        self.next_id += inserts


def _deletes(keys: pa.Table, schema: pa.Schema) -> pa.Table:
    """Delete changes of ``keys``: the key, nulls elsewhere, op ``d``."""
    n = keys.num_rows
    columns = [keys.column(KEY) if f.name == KEY else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays([*columns, pa.array(["d"] * n, pa.string())], names=[*schema.names, OP])


def same_rows(actual: pa.Table, expected: pa.Table) -> str | None:
    """Why ``actual`` (with ``id`` and ``version``) does not hold ``expected``'s rows (``None``: it does)."""
    got = actual.select([KEY, "version"]).sort_by(KEY)
    if got.num_rows != expected.num_rows:
        return f"{got.num_rows} rows, expected {expected.num_rows}"
    for name in (KEY, "version"):
        if not pc.all(pc.equal(got.column(name), expected.column(name))).as_py():
            return f"column {name} differs from the expected state"
    return None
