"""The row delta's check of a batch's keys against other writers' commits: its cost per batch.

::

    .venv/bin/python -m benchmarks.upsert_key_check --commits 100 --keys 2000

A table (``id`` long key, ``bucket(16, id)``, format v2, SQLite catalog, local disk)
gets one load commit of ``--load-rows`` rows; an upsert batch's lookup would plan there
(snapshot S). Then another writer commits ``--commits`` batches of ``--rows`` new rows each
(one data file per bucket: 16 per commit), with the sink's own write task and row delta
commit. Measured: :meth:`icesink.upsert.validate.ConcurrentKeys.check` of the batch's
``--keys`` keys from S, cold (the batch's first commit attempt: manifest lists, the
manifests those commits wrote, the data files read) and warm (a later attempt of the same
batch: manifests and files cached), median of ``--repeats``, for the other writer's keys

* ``disjoint``: a range of their own above the batch's: the files' key bounds exclude
  every key, no data file is opened;
* ``interleaved``: odd keys among the batch's even ones: every file's bounds admit keys,
  so each file's key column is read, and none holds a key (no redo);
* ``same``: the batch's own keys in the last commit (the others disjoint): a redo,
  found at the first file read.

The figures: benchmarks/README.md, "The upsert key check".
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import BucketTransform
from pyiceberg.types import LongType, NestedField, StringType

from benchmarks._write_specs import table_write_spec
from icesink.commit.ledger import BatchRange
from icesink.config import CommitConfig
from icesink.upsert.row_delta import RowDeltaCommitter
from icesink.upsert.validate import ConcurrentKeys, KeyCheck
from icesink.write.task import DataTaskWriter

_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
    identifier_field_ids=[1],
)
_SPEC = PartitionSpec(PartitionField(1, 1000, BucketTransform(16), "id_bucket"))
_LAYOUTS = ("disjoint", "interleaved", "same")


def _commit_rows(table: Table, committer: RowDeltaCommitter, ids: list[int], batch_id: int) -> None:
    """Write ``ids`` with the sink's write task and commit them as one batch of ``committer``'s sink."""
    rows = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
    spec = table_write_spec(
        table,
        f"b{batch_id}",
        target_file_size_bytes=64 << 20,
        row_group_size_bytes=8 << 20,
        memory_budget_bytes=64 << 20,
    )
    files = DataTaskWriter(spec, task_id=0, attempt=0).write_all(iter(rows.to_batches()))
    table.refresh()
    committer.commit(files, [], table.metadata.current_snapshot_id, BatchRange(batch_id, batch_id), {})


def _other_keys(layout: str, commit: int, rows: int, keys: int, commits: int) -> list[int]:
    if layout == "same" and commit == commits - 1:
        return list(range(0, keys * 2, 2))
    if layout in ("disjoint", "same"):
        return [keys * 2 + commit * rows + i for i in range(rows)]
    step = max(1, (keys * 2) // rows)  # odd keys spread over the batch's range, never one of its own
    return [(commit * 2 * rows + i * step * 2) % (keys * 2) + 1 for i in range(rows)]


def _measure(workdir: Path, layout: str, args: argparse.Namespace) -> dict[str, float]:
    catalog = SqlCatalog(layout, uri=f"sqlite:///{workdir}/{layout}.db", warehouse=f"file://{workdir}")
    catalog.create_namespace_if_not_exists("bench")
    table = catalog.create_table(
        f"bench.{layout}", _SCHEMA, partition_spec=_SPEC, properties={"format-version": "2"}
    )
    config = CommitConfig(retries=3, min_wait_ms=1, max_wait_ms=10)
    load = RowDeltaCommitter(table, "loader", config)
    _commit_rows(table, load, list(range(args.keys * 2, args.keys * 2 + args.load_rows)), 0)
    table.refresh()
    start = table.metadata.current_snapshot_id
    other = RowDeltaCommitter(catalog.load_table(f"bench.{layout}"), "other", config)
    for commit in range(args.commits):
        ids = _other_keys(layout, commit, args.rows, args.keys, args.commits)
        _commit_rows(other.table, other, ids, commit + 1)
    table.refresh()
    keys = pa.table({"id": pa.array(range(0, args.keys * 2, 2), pa.int64())})
    cold: list[float] = []
    warm: list[float] = []
    check = KeyCheck()
    for _ in range(args.repeats):
        concurrent = ConcurrentKeys(table.io, ["id"], keys)
        for times in (cold, warm):
            began = time.perf_counter()
            check = concurrent.check(table.metadata, start)
            times.append(time.perf_counter() - began)
    return {
        "snapshots": check.snapshots,
        "files_added": check.files_added,
        "files_read": check.files_read,
        "files_with_keys": check.files_with_keys,
        "cold_s": statistics.median(cold),
        "warm_s": statistics.median(warm),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--commits", type=int, default=100, help="commits of the other writer")
    parser.add_argument("--rows", type=int, default=1000, help="rows of each of its commits")
    parser.add_argument("--keys", type=int, default=2000, help="keys of the checked batch")
    parser.add_argument("--load-rows", type=int, default=100_000, help="rows of the load commit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--layouts", default=",".join(_LAYOUTS), help="comma list of " + ", ".join(_LAYOUTS))
    args = parser.parse_args(argv)
    print("layout       snapshots  files added  files read  holding  cold (ms)  warm (ms)", flush=True)
    with tempfile.TemporaryDirectory(prefix="icesink-key-check-") as tmp:
        for layout in args.layouts.split(","):
            r = _measure(Path(tmp), layout, args)
            print(
                f"{layout:<12} {r['snapshots']:>9} {r['files_added']:>12} {r['files_read']:>11} "
                f"{r['files_with_keys']:>8} {r['cold_s'] * 1000:>10.0f} {r['warm_s'] * 1000:>10.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
