"""Small upsert batches through the sink at Spark's default settings: time and delete files per batch.

A CDC stream of a few thousand changes per trigger is common. This benchmark runs the
sink (``IcebergSink``, ``write.mode=upsert``) the way a streaming query does, one call per
micro-batch, on a session that leaves ``spark.sql.shuffle.partitions`` unset (Spark's
default, 200): batch 0 loads ``--keys`` keys into a table partitioned by
``bucket(--buckets, id)``, then ``--batches`` seeded batches of ``--batch-size`` changes
(70% updates, 20% inserts, 10% deletes, :mod:`benchmarks._upsert_changes`) follow.

Printed: the per-batch time (median of batches 2..N: batch 1 warms up), the position
delete files each batch added (from its snapshot summary) and the table's at the end,
the time of a DuckDB scan of the table, and whether pyiceberg and DuckDB read exactly the
expected rows. ``--lookup-driver-max-files`` passes ``upsert.lookup-driver-max-files`` to the
sink (0: every lookup a Spark job; unset: the sink's default); ``--shuffle-partitions`` sets
``spark.sql.shuffle.partitions``, to see that the batch's cost does not depend on it. The script uses only the
sink's public options, so the same file run against an older checkout
(``PYTHONPATH=<checkout> python <this file>``, without ``--lookup-driver-max-files``)
measures that checkout's behaviour::

    .venv/bin/python -m benchmarks.upsert_small_batches --batches 20
    .venv/bin/python -m benchmarks.upsert_small_batches --batches 20 --lookup-driver-max-files 0
    .venv/bin/python -m benchmarks.upsert_small_batches --batches 20 --shuffle-partitions 4
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from benchmarks import _upsert_changes as model
from benchmarks._session import _log, _machine, _session
from benchmarks._upsert_sink import TABLE, sink_options
from icesink import IcebergSink
from tests.support.duckdb_reader import duckdb_read

DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench-upsert-small"


def _options(workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    extra = {}
    if args.lookup_driver_max_files is not None:
        extra["upsert.lookup-driver-max-files"] = str(args.lookup_driver_max_files)
    return sink_options(workdir, args.buckets, extra)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load, then the batches; the figures."""
    workdir: Path = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "warehouse").mkdir(parents=True)
    load_start = os.getloadavg()
    conf = {"spark.sql.shuffle.partitions": str(args.shuffle_partitions)} if args.shuffle_partitions else {}
    spark = _session(args.master, conf)  # without --shuffle-partitions: Spark's default, 200
    try:
        sink = IcebergSink.from_options(_options(workdir, args))
        load = model.rows(list(range(args.keys)), 0)
        load = load.append_column(model.OP, pa.array(["c"] * load.num_rows, pa.string()))
        sink(spark.createDataFrame(load), 0)
        stream = model.ChangeStream(args.keys, args.seed)
        seconds: list[float] = []
        for version in range(1, args.batches + 1):
            batch_df = spark.createDataFrame(stream.batch(version, args.batch_size)).persist()
            batch_df.count()  # the batch in memory, as a source's would be: only the sink is timed
            started = time.perf_counter()
            sink(batch_df, version)
            seconds.append(time.perf_counter() - started)
            batch_df.unpersist()
            _log(f"batch {version}: {seconds[-1]:.2f} s")
        table = sink.catalog.load_table(TABLE)
    finally:
        spark.stop()
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": _machine(load_start, os.getloadavg()),
        **_figures(table, seconds, stream),
    }


def _figures(table: Any, seconds: list[float], stream: model.ChangeStream) -> dict[str, Any]:
    summaries = [s.summary for s in table.snapshots()[1:]]  # the load's snapshot left out
    added = [int(s["added-delete-files"]) if s and "added-delete-files" in s else 0 for s in summaries]
    last = table.current_snapshot().summary
    started = time.perf_counter()
    by_duckdb = duckdb_read(table.metadata_location)
    duckdb_s = time.perf_counter() - started
    wrong = model.same_rows(table.scan().to_arrow(), stream.expected()) or model.same_rows(
        by_duckdb, stream.expected()
    )
    if wrong:
        raise SystemExit(f"the table does not hold the expected rows: {wrong}")
    return {
        "batch_s_median": statistics.median(seconds[1:]) if len(seconds) > 1 else seconds[0],
        "batch_s": [round(s, 3) for s in seconds],
        "delete_files_added_per_batch": added,
        "delete_files_in_table": int(last["total-delete-files"]) if last else 0,
        "duckdb_scan_s": round(duckdb_s, 3),
        "rows_as_expected": True,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=1_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--buckets", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--lookup-driver-max-files", type=int, default=None)
    parser.add_argument("--shuffle-partitions", type=int, default=None, help="unset: Spark's default")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--out", type=Path, default=None, help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    figures = run(args)
    text = json.dumps(figures, indent=2)
    if args.out:
        args.out.write_text(text)
    added = figures["delete_files_added_per_batch"]
    print(
        f"median batch time (batches 2..{args.batches}): {figures['batch_s_median']:.2f} s; "
        f"delete files added per batch: min {min(added)} max {max(added)} total {sum(added)}; "
        f"in the table at the end: {figures['delete_files_in_table']}; "
        f"DuckDB scan {figures['duckdb_scan_s']:.2f} s; rows as expected"
    )


if __name__ == "__main__":
    main()
