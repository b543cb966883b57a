"""The sink's compaction over a long appended stream: bytes rewritten, files a reader opens, CPU.

A table of one partition gets ``--batches`` batches of ``--files`` small files each (``--rows``
rows of random 256-character strings a file, pyiceberg's append), and after each batch the
sink's maintenance of it (:class:`icesink.maintenance.scheduler.TableMaintenance`, the unit the
sink runs after its commits: default options but the target size, and snapshots expired as they
go). What it reports: the bytes its ``replace`` snapshots added against the bytes appended (write
amplification), the data files after each batch's maintenance (what a reader opens: the most and
the last count), the compactions, and the CPU seconds maintenance took. Every row is checked once
at the end. No Spark: the figures are the maintenance's alone.

Compare two checkouts in turns, each run a new process importing the checkout's ``icesink``::

    PYTHONPATH=<main checkout> .venv/bin/python benchmarks/compaction_tiers.py --batches 400
    PYTHONPATH=. .venv/bin/python benchmarks/compaction_tiers.py --batches 400
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import load_catalog
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot, Summary

from icesink.config_maintenance import MaintenanceConfig
from icesink.maintenance.scheduler import Budget, TableMaintenance

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("payload", pa.string())])


def _table(folder: Path) -> Table:
    (folder / "warehouse").mkdir()
    catalog = load_catalog(
        "bench",
        type="sql",
        uri=f"sqlite:///{folder / 'catalog.db'}",
        warehouse=f"file://{folder / 'warehouse'}",
    )
    catalog.create_namespace("db")
    properties = {"format-version": "2", "commit.manifest-merge.enabled": "true"}
    return catalog.create_table("db.stream", schema=SCHEMA, properties=properties)


def _file(first_id: int, rows: int, rng: random.Random) -> pa.Table:
    payload = [f"{rng.getrandbits(128):032x}" * 8 for _ in range(rows)]
    return pa.table(
        {"id": pa.array(range(first_id, first_id + rows), pa.int64()), "payload": payload}, SCHEMA
    )


def _summary(snapshot: Snapshot | None) -> Summary:
    assert snapshot is not None and snapshot.summary is not None
    return snapshot.summary


def _count(table: Table, seen: set[int], added: dict[str, int]) -> None:
    """Add the bytes of the snapshots not ``seen`` yet to ``added``, by operation."""
    for snapshot in table.snapshots():
        if snapshot.snapshot_id not in seen:
            seen.add(snapshot.snapshot_id)
            summary = _summary(snapshot)
            operation = summary.operation.value
            added[operation] = added.get(operation, 0) + int(summary.get("added-files-size") or 0)
            added[f"{operation}s"] = added.get(f"{operation}s", 0) + 1


def run(batches: int, files: int, rows: int, target_file_size_bytes: int, seed: int = 0) -> dict[str, Any]:
    """One stream (see the module); its figures."""
    # Snapshots expire as they go (the newest 10 kept): pyiceberg rewrites every snapshot's
    # entry at each commit, which would cost more than the maintenance measured.
    config = MaintenanceConfig(enabled=True, max_snapshot_age_s=0, min_snapshots_to_keep=10)
    with tempfile.TemporaryDirectory(prefix="compaction-tiers-") as folder:
        table = _table(Path(folder))
        state, rng = TableMaintenance("db.stream"), random.Random(seed)
        data_files: list[int] = []
        added: dict[str, int] = {"append": 0, "replace": 0}
        seen: set[int] = set()
        cpu_s, next_id = 0.0, 0
        for _ in range(batches):
            for _ in range(files):
                table.append(_file(next_id, rows, rng))
                next_id += rows
            _count(table, seen, added)
            started = time.process_time()
            state.run(table, config, target_file_size_bytes, Budget(3600.0), lambda: lambda path: True)
            cpu_s += time.process_time() - started
            _count(table, seen, added)
            data_files.append(int(_summary(table.current_snapshot()).get("total-data-files") or 0))
        ids = table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist()
        assert sorted(ids) == list(range(next_id)), "rows lost or duplicated"
    return {
        "batches": batches,
        "files_a_batch": files,
        "appended_bytes": added["append"],
        "rewritten_bytes": added["replace"],
        "rewritten_per_appended": round(added["replace"] / max(added["append"], 1), 3),
        "compactions": added.get("replaces", 0),
        "data_files_most": max(data_files),
        "data_files_last": data_files[-1],
        "maintenance_cpu_s": round(cpu_s, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--files", type=int, default=4, help="files a batch (a Kafka job's partitions read)")
    parser.add_argument("--rows", type=int, default=200, help="rows a file (about 270 bytes each)")
    parser.add_argument("--target-file-size-bytes", type=int, default=512 * 1024 * 1024)
    args = parser.parse_args()
    import icesink

    figures = run(args.batches, args.files, args.rows, args.target_file_size_bytes)
    print(json.dumps({"icesink": str(Path(icesink.__file__).parent.parent), **figures}))


if __name__ == "__main__":
    main()
