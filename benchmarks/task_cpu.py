"""A write task's own cost, without Spark: one batch of the reference workload through its writer.

::

    .venv/bin/python -m benchmarks.task_cpu --rounds 7

The input is one file of ``--rows`` rows of the reference workload (written once by
Spark into ``--workdir``, then read back with pyarrow in batches of ``--batch-rows``, as
Spark hands them to a Python worker). Each round writes them all with the writer a
`none`-mode task runs (``icesink.write.task.DataTaskWriter``: split by partition value in
the task, 64 files, zstd) into a local table folder, and measures the process's CPU
seconds (every thread: the files are encoded on two) and the wall time. What Spark
adds around it (the Arrow hand-off, the worker's loop) is not in it, so two commits'
writers compare with less noise than whole runs do: run this module at each commit (a
worktree of it first on ``PYTHONPATH``), taking turns.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from benchmarks._write_specs import table_write_spec
from icesink.jobs.taxi_workload import PARTITION_BY, write_files
from icesink.partitioning import build_partition_spec, parse_partition_by
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _input(workdir: Path, rows: int, batch_rows: int) -> list[pa.RecordBatch]:
    folder = workdir / f"input-1x{rows}"
    if not (folder / f"_WORKLOAD_1x{rows}").exists():
        spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
        write_files(spark, folder, 1, rows)
        spark.stop()
    [path] = sorted(folder.glob("part-*.parquet"))
    batches = list(pq.ParquetFile(path).iter_batches(batch_size=batch_rows))
    schema = pa.schema(
        [
            f.with_type(pa.timestamp("us", "UTC")) if pa.types.is_timestamp(f.type) else f
            for f in batches[0].schema
        ]
    )
    return [batch.cast(schema) for batch in batches]


def _spec(batches: list[pa.RecordBatch], warehouse: Path) -> WriteSpec:
    catalog = SqlCatalog("bench", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=f"file://{warehouse}")
    catalog.create_namespace("bench")
    schema = catalog.create_table("bench.probe", schema=batches[0].schema).schema()
    spec = build_partition_spec(parse_partition_by(PARTITION_BY), schema)
    table = catalog.create_table("bench.taxi", schema=schema, partition_spec=spec)
    return table_write_spec(
        table,
        "bench",
        target_file_size_bytes=512 << 20,
        row_group_size_bytes=128 << 20,
        memory_budget_bytes=512 << 20,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "icesink-task-cpu")
    args = parser.parse_args(argv)
    batches = _input(args.workdir, args.rows, args.batch_rows)
    spec = _spec(batches, Path(tempfile.mkdtemp(prefix="icesink-task-cpu-")))
    cpu, wall = [], []
    for round_ in range(args.rounds + 1):  # the first round warms up (imports, allocator)
        started, cpu_start = time.perf_counter(), _cpu_seconds()
        messages = DataTaskWriter(spec, task_id=round_, attempt=0).write_all(iter(batches))
        if round_:
            wall.append(time.perf_counter() - started)
            cpu.append(_cpu_seconds() - cpu_start)
    size = sum(m.file_size_bytes for m in messages) / 1e6
    median_cpu, median_wall = statistics.median(cpu), statistics.median(wall)
    print(
        f"{args.rows:,} rows in {len(messages)} files ({size:.1f} MB): CPU {median_cpu:.3f} s "
        f"({min(cpu):.3f}-{max(cpu):.3f}), wall {median_wall:.3f} s, median of {args.rounds} rounds"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
