"""What a Parquet file costs pyarrow itself: the same rows as one file, and as many small files.

A routed micro-batch writes a file per table per task: 200 tables mean 200 files of a
few thousand rows where one table gets a few large files. This measures the part of
that which is pyarrow's alone, with no icesink code: ``--rows`` of the Kafka benchmarks'
1 KB JSON events (:mod:`benchmarks.kafka_throughput`, decoded to Arrow) written with
``pyarrow.parquet.write_table`` as one file, then as ``--files`` files of equal parts,
in memory and on local disk, for each codec; the median of ``--rounds`` rounds.

    .venv/bin/python -m benchmarks.file_cost --rows 62500 --files 50 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks._kafka_messages import message


def events(rows: int) -> pa.Table:
    """``rows`` of the Kafka benchmarks' events, as Arrow infers their types."""
    rng = random.Random(7)
    return pa.Table.from_pylist([json.loads(message(i, rng)) for i in range(rows)])


def write_seconds(tables: list[pa.Table], codec: str, folder: Path | None, rounds: int) -> float:
    """The median seconds of writing each of ``tables`` as a file (in memory when ``folder`` is None)."""
    seconds = []
    for _ in range(rounds):
        start = time.perf_counter()
        for n, table in enumerate(tables):
            target = pa.BufferOutputStream() if folder is None else str(folder / f"f{n}.parquet")
            pq.write_table(table, target, compression=codec)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=62_500)
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    table = events(args.rows)
    part = args.rows // args.files
    parts = [table.slice(i * part, part) for i in range(args.files)]
    folder = Path(tempfile.mkdtemp(prefix="icesink-file-cost-"))
    print(f"{args.rows:,} rows of {table.num_columns} columns ({table.nbytes / 2**20:.1f} MiB in Arrow)")
    print(f"| codec | target | 1 file: ms | {args.files} files: ms | ms per file | x one file |")
    print("|---|---|---|---|---|---|")
    for codec in ("zstd", "snappy", "none"):
        for target in ("memory", "disk"):
            where = None if target == "memory" else folder
            one = write_seconds([table], codec, where, args.rounds)
            many = write_seconds(parts, codec, where, args.rounds)
            print(
                f"| {codec} | {target} | {one * 1000:.1f} | {many * 1000:.1f} | "
                f"{many * 1000 / args.files:.2f} | {many / one:.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
