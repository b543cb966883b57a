"""Upserts: icesink's change batches against pyiceberg's ``Table.upsert``; reads before and after compaction.

One table of ``--rows`` rows (``id`` long key, ``bucket(--buckets, id)``, five typed
columns) is loaded once by the sink's write tasks (``spark.range`` in order: each load
file is sorted by ``id`` within its bucket) and committed; a second table commits the
same data files: the reference, identical at the start. Then ``--batches`` seeded
batches of ``--batch-size`` changes (70% updates of live keys, 20% inserts of new keys,
10% deletes, see :mod:`benchmarks._upsert_changes`) are applied:

* icesink, the way the sink runs a micro-batch: the batch's Parquet file read by Spark,
  ``change_frames`` (last change per key, keys collected), ``run_write`` of the new row
  versions in the executors, ``UpsertApplier.apply`` (lookup planned from the
  manifests, lookup tasks in the executors writing position deletes, one row delta
  commit);
* pyiceberg, on batch 1 and the next ``--pyiceberg-batches`` batches only (0: none; it rewrites
  every data file holding a changed key: minutes per batch on a large table):
  ``Table.upsert`` of the inserted and updated rows, then ``Table.delete`` of the
  deleted keys.

Batch 1 warms up (Spark's JIT, Python workers) and is not counted in the medians.

Each icesink batch checks that its lookup found exactly one live row per updated or
deleted key. After the last pyiceberg batch both tables must hold the same rows (all
columns); every read of the table below must equal the expected state. Reported: changes
per second per batch (median) for both and their ratio on the same batches; per icesink
batch the data files read by the lookup against the data files in the table, the files
each key is looked up in, keys per lookup task, key rows read per change, row groups
skipped, delete files written, the time of
the lookup and of plan plus commit; then the time of a full scan through pyiceberg
(to Arrow) and through DuckDB's iceberg extension, after the batches, before and after
``compact_partition`` of every bucket. Sizes::

    .venv/bin/python -m benchmarks.upsert --rows 100000 --batch-size 2000 --batches 4 --pyiceberg-batches 1
    .venv/bin/python -m benchmarks.upsert --rows 1000000 --batch-size 10000 --batches 10 --pyiceberg-batches 2
    .venv/bin/python -m benchmarks.upsert --out upsert.json    # full: 10M rows, 100 x 100k changes
    .venv/bin/python -m benchmarks.upsert --render upsert.json  # the tables of an earlier run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from benchmarks import _upsert_changes as model
from benchmarks._session import _log, _machine, _session
from benchmarks._upsert_index import index_applier, key_index_summary, timed_plans
from benchmarks._upsert_reads import _compact, _reads
from benchmarks._upsert_reference import op_counts, pyiceberg_batch, reference_table, same_tables
from benchmarks._upsert_report import markdown
from icesink.catalog import CREATED_TABLE_PROPERTIES
from icesink.upsert.batch import UpsertApplier, UpsertOutcome
from icesink.upsert.changes import change_frames
from icesink.upsert.lookup import LookupResult, LookupSpec, run_lookup
from icesink.upsert.messages import LookupTask
from tests.support.upserts import sql_catalog, write_spec

DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench-upsert"


@dataclass
class _Tables:
    icesink: Table
    reference: Table
    applier: UpsertApplier
    lookup_seconds: list[float]
    without_index: tuple[Table, UpsertApplier] | None = None  # --key-index both: the other table


def _setup(spark: SparkSession, workdir: Path, args: argparse.Namespace) -> _Tables:
    """Both tables, loaded with the same data files."""
    catalog = sql_catalog(workdir)
    catalog.create_namespace_if_not_exists("bench")
    spec = model.partition_spec(args.buckets)
    properties = {"format-version": "2", **CREATED_TABLE_PROPERTIES}
    icesink = catalog.create_table("bench.icesink", model.SCHEMA, partition_spec=spec, properties=properties)
    lookup_seconds: list[float] = []

    def timed_lookup(tasks: list[LookupTask], lookup: LookupSpec) -> LookupResult:
        started = time.perf_counter()
        result = run_lookup(spark, tasks, lookup, parallelism=spark.sparkContext.defaultParallelism)
        lookup_seconds.append(time.perf_counter() - started)
        return result

    applier = index_applier(icesink, timed_lookup, args.key_index != "off")
    timed_plans(applier, lookup_seconds)
    started = time.perf_counter()
    load = spark.range(args.rows).selectExpr(
        model.KEY, *(f"{sql} AS {name}" for name, sql in model.load_columns().items())
    )
    written = _write(load, icesink, "load")
    applier.apply(pa.table({model.KEY: pa.array([], pa.int64())}), written, 0, "load")
    icesink.refresh()
    reference = reference_table(catalog, icesink, "bench.pyiceberg")
    without_index = None
    if args.key_index == "both":
        plain = reference_table(catalog, icesink, "bench.no_index")
        without_index = (plain, index_applier(plain, timed_lookup, False, "upsert-plain"))
        timed_plans(without_index[1], lookup_seconds)
    _log(f"loaded {args.rows:,} rows in {len(written)} data files ({time.perf_counter() - started:.0f} s)")
    return _Tables(icesink, reference, applier, lookup_seconds, without_index)


def _write(df: Any, table: Table, prefix: str) -> list[Any]:
    """The sink's write tasks over ``df`` (the table's columns); the data file messages."""
    from icesink.write.task import run_write

    return list(run_write(df.select(*table.schema().column_names), write_spec(table, prefix)).files)


def _icesink_batch(
    spark: SparkSession,
    tables: _Tables,
    path: Path,
    version: int,
    expected_matches: int,
    target: tuple[Table, UpsertApplier] | None = None,
) -> dict[str, Any]:
    """One batch through change frames, write tasks and the upsert applier; what it did."""
    table, applier = target or (tables.icesink, tables.applier)
    lookups_before = len(tables.lookup_seconds)
    started = time.perf_counter()
    batch_df = spark.read.parquet(str(path)).persist()
    frames = change_frames(batch_df, [model.KEY], model.OP)
    keyed = time.perf_counter()
    written = _write(frames.rows, table, f"b{version}")
    wrote = time.perf_counter()
    outcome = applier.apply(frames.keys, written, version, f"b{version}a0")
    seconds = time.perf_counter() - started
    batch_df.unpersist()
    lookup = sum(tables.lookup_seconds[lookups_before:])  # planned and run (through the index: both)
    if outcome.report.rows_matched != expected_matches:
        raise SystemExit(
            f"batch {version}: the lookup found {outcome.report.rows_matched} live rows of changed keys, "
            f"expected {expected_matches}"
        )
    return {
        "changes": frames.keys.num_rows,
        "seconds": seconds,
        "changes_per_s": frames.keys.num_rows / seconds,
        "change_frames_s": keyed - started,
        "write_s": wrote - keyed,
        "lookup_s": lookup,
        "plan_and_commit_s": time.perf_counter() - wrote - lookup,
        "data_files_written": len(written),
        **_lookup_figures(outcome),
    }


def _lookup_figures(outcome: UpsertOutcome) -> dict[str, Any]:
    plan, report = outcome.plan, outcome.report
    per_task = [task.keys.num_rows for task in plan.tasks]
    buckets = {task.partition for task in plan.tasks}
    return {
        "files_in_table": plan.files_in_table,
        "files_read": plan.files_to_read,
        "buckets_read": len(buckets),
        "keys_per_task_mean": statistics.fmean(per_task) if per_task else 0,
        "keys_per_task_max": max(per_task, default=0),
        "files_per_key": sum(per_task) / plan.keys if plan.keys else 0,
        "rows_read": report.rows_read,  # through the key index: blob entries read
        "rows_matched": report.rows_matched,
        "row_groups_skipped": report.row_groups_skipped,
        "delete_files_written": outcome.delete_files,
        "redos": outcome.redos,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark; its figures."""
    workdir: Path = args.workdir.resolve() / f"run-{args.seed}"
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "changes").mkdir(parents=True)
    load_start = os.getloadavg()
    spark = _session(args.master)
    try:
        tables = _setup(spark, workdir, args)
        stream = model.ChangeStream(args.rows, args.seed)
        icesink, reference = _batches(spark, tables, stream, workdir, args)
        before = _reads(tables.icesink, stream, args.read_repeats)
        compaction = _compact(tables.icesink, args.buckets)
        after = _reads(tables.icesink, stream, args.read_repeats)
    finally:
        spark.stop()
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": _machine(load_start, os.getloadavg()),
        "icesink": icesink,
        "pyiceberg": reference,
        "reads": {"before_compaction": before, "compaction": compaction, "after_compaction": after},
    }


def _batches(
    spark: SparkSession,
    tables: _Tables,
    stream: model.ChangeStream,
    workdir: Path,
    args: argparse.Namespace,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every batch through icesink; the first ``--pyiceberg-batches`` after the warm-up through pyiceberg too.

    Batch 1 warms up (Spark's JIT, Python workers, first reads of manifests) and is not
    counted; pyiceberg applies it too, so that both tables stay the same.
    """
    icesink: list[dict[str, Any]] = []
    reference: list[dict[str, Any]] = []
    without: list[dict[str, Any]] = []
    for version in range(1, args.batches + 1):
        changes = stream.batch(version, args.batch_size)
        path = workdir / "changes" / f"batch-{version:05d}.parquet"
        pq.write_table(changes, path)
        counts = op_counts(changes)
        figures = _icesink_batch(spark, tables, path, version, counts["u"] + counts["d"])
        icesink.append({"batch": version, **figures, "live_rows": stream.live})
        line = f"batch {version}: icesink {figures['changes_per_s']:,.0f} changes/s"
        line += f" (lookup {figures['lookup_s']:.2f} s)"
        if tables.without_index is not None:
            other = _icesink_batch(
                spark, tables, path, version, counts["u"] + counts["d"], tables.without_index
            )
            without.append({"batch": version, **other, "live_rows": stream.live})
            line += (
                f", without the key index {other['changes_per_s']:,.0f} (lookup {other['lookup_s']:.2f} s)"
            )
        if args.pyiceberg_batches and version <= args.pyiceberg_batches + 1:
            theirs = pyiceberg_batch(tables.reference, changes, counts["u"], counts["c"])
            reference.append({"batch": version, **theirs})
            line += f", pyiceberg {theirs['changes_per_s']:,.0f} changes/s"
            if version == args.pyiceberg_batches + 1:
                snapshot = tables.icesink.current_snapshot()
                assert snapshot is not None
                same_tables(tables.icesink, snapshot.snapshot_id, tables.reference)
        _log(
            f"{line}; lookup read {figures['files_read']} of {figures['files_in_table']} data files, "
            f"load {os.getloadavg()[0]:.1f}"
        )
    if without:
        _log(key_index_summary(icesink, without))
    return icesink, reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000, help="rows of the initial load")
    parser.add_argument("--batch-size", type=int, default=100_000, help="changes per batch")
    parser.add_argument("--batches", type=int, default=100, help="upsert batches before the reads")
    parser.add_argument(
        "--pyiceberg-batches",
        type=int,
        default=3,
        help="batches also applied by pyiceberg after its warm-up batch (0: none, icesink only)",
    )
    parser.add_argument("--buckets", type=int, default=16, help="N of bucket(N, id)")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--read-repeats", type=int, default=3, help="full scans per reader, median")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--key-index",
        choices=("on", "off", "both"),
        default="on",
        help="the lookup through the key index (upsert.key-index), or reading the data files, or "
        "both in the same run (a second table loaded with the same files gets each batch too)",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--keep", action="store_true", help="keep the tables and the change files")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--render", type=Path, help="print the tables of an earlier --out file and exit")
    args = parser.parse_args(argv)
    if args.render:
        print(markdown(json.loads(args.render.read_text())))
        return 0
    if not 0 <= args.pyiceberg_batches < args.batches:
        parser.error("--pyiceberg-batches must be 0 (icesink only) or more, and less than --batches")
    result = run(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
