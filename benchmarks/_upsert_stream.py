"""The stream of :mod:`benchmarks.upsert_long`: the load, the batches through the sink, the scans.

One Spark session with Spark's default settings (``--shuffle-partitions`` aside), one
``IcebergSink`` from public options, called once per micro-batch as ``foreachBatch`` does.
Each batch's figures come from :class:`~benchmarks._upsert_sink.BatchProbe` and the table's
snapshot summary; the scans from :mod:`benchmarks._upsert_reads`; pyiceberg's batches from
:mod:`benchmarks._upsert_reference`.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from benchmarks import _upsert_changes as model
from benchmarks._session import _log, _session
from benchmarks._upsert_reads import _reads, compacted_reads
from benchmarks._upsert_reference import op_counts, pyiceberg_batch, reference_table, same_tables
from benchmarks._upsert_sink import TABLE, BatchProbe, sink_options, table_files
from icesink import IcebergSink
from tests.support.duckdb_reader import duckdb_read

REFERENCE = "bench.pyiceberg"
COMPACTED = "bench.compacted"


def _options(workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    extra = dict(option.split("=", 1) for option in args.sink_option)
    if args.maintenance == "off":
        extra["maintenance.enabled"] = "false"
    return sink_options(workdir, args.buckets, extra)


def _load(spark: SparkSession, sink: IcebergSink, keys: int) -> float:
    """Batch 0: every key inserted through the sink (the rows of :func:`model.rows` at version 0)."""
    started = time.perf_counter()
    columns = [f"{sql} AS {name}" for name, sql in model.load_columns().items()]
    load = spark.range(keys).selectExpr(model.KEY, *columns, f"'c' AS {model.OP}")
    sink(load, 0)
    return time.perf_counter() - started


def run_stream(
    args: argparse.Namespace, workdir: Path, save: Callable[[dict[str, Any]], object]
) -> dict[str, Any]:
    """Load, batches, scans (see the module); the figures, also handed to ``save`` after every batch
    (a run cut short keeps what it measured)."""
    (workdir / "warehouse").mkdir(parents=True)
    conf = {"spark.sql.shuffle.partitions": str(args.shuffle_partitions)} if args.shuffle_partitions else {}
    spark = _session(args.master, conf)
    try:
        sink = IcebergSink.from_options(_options(workdir, args))
        load_s = _load(spark, sink, args.keys)
        table = sink.catalog.load_table(TABLE)
        _log(f"loaded {args.keys:,} keys in {load_s:.0f} s: {table_files(_summary(table))}")
        duckdb_read(table.metadata_location, "SELECT count(*) FROM t")  # its first read loads its libraries
        reference = reference_table(sink.catalog, table, REFERENCE) if args.pyiceberg_batches else None
        stream = model.ChangeStream(args.keys, args.seed)
        probe = BatchProbe(sink.metrics.registry)
        batches, theirs, scans = [], [], []
        for version in range(1, args.batches + 1):
            changes = stream.batch(version, args.changes)
            batches.append(_batch(spark, sink, probe, table, changes, version))
            b = batches[-1]
            lookup = f"{b['lookup_s']:.2f}" if b["lookup_s"] is not None else "-"
            _log(
                f"batch {version}: {b['seconds']:.2f} s, {b['changes_per_s']:,.0f} changes/s, "
                f"lookup {lookup} s, commit {b['commit_s']:.2f} s, maintenance {b['maintenance_s']:.2f} s; "
                f"{b['data_files']} data and {b['delete_files']} delete files; load {b['load_average']:.1f}"
            )
            if reference is not None and version <= args.pyiceberg_batches + 1:
                counts = op_counts(changes)
                theirs.append(
                    {"batch": version, **pyiceberg_batch(reference, changes, counts["u"], counts["c"])}
                )
                _log(f"batch {version}: pyiceberg {theirs[-1]['changes_per_s']:,.0f} changes/s")
                if version == args.pyiceberg_batches + 1:
                    snapshot = table.current_snapshot()
                    assert snapshot is not None
                    same_tables(table, snapshot.snapshot_id, reference)
                    sink.catalog.drop_table(REFERENCE)  # its files are shared with the stream's table
                    reference = None
            if version % args.scan_every == 0 or version == args.batches:
                scans.append(_scans(sink, table, stream, version))
            save({"load_s": load_s, "batches": batches, "pyiceberg": theirs, "scans": scans})
    finally:
        spark.stop()
    return {"load_s": load_s, "batches": batches, "pyiceberg": theirs, "scans": scans}


def _summary(table: Table) -> Mapping[str, str] | None:
    table.refresh()
    snapshot = table.current_snapshot()
    return snapshot.summary if snapshot is not None else None


def _batch(
    spark: SparkSession, sink: IcebergSink, probe: BatchProbe, table: Table, changes: Any, version: int
) -> dict[str, Any]:
    """One micro-batch through the sink, timed; what it did and the table's files after it."""
    batch_df = spark.createDataFrame(changes).persist()
    batch_df.count()  # the batch in memory, as a source's would be: only the sink is timed
    with probe.batch() as figures:
        sink(batch_df, version)
    batch_df.unpersist()
    return {
        "batch": version,
        "changes": changes.num_rows,
        **figures,
        "changes_per_s": changes.num_rows / figures["seconds"],
        **table_files(_summary(table)),
        "load_average": os.getloadavg()[0],
    }


def _scans(sink: IcebergSink, table: Table, stream: model.ChangeStream, version: int) -> dict[str, Any]:
    """Full scans of the table and of its rows freshly compacted, each checked against the expected rows."""
    live = _reads(table, stream, 1)
    fresh = compacted_reads(sink.catalog, table, stream, COMPACTED)
    _log(
        f"scans after batch {version}: pyiceberg {live['pyiceberg_s']:.2f} s "
        f"(compacted {fresh['pyiceberg_s']:.2f}), DuckDB {live['duckdb_s']:.2f} s "
        f"(compacted {fresh['duckdb_s']:.2f}), rows as expected"
    )
    return {"batch": version, "live": live, "compacted": fresh}
