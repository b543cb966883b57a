"""How fast the data files of several writes are read back: their sizes, and two readers' times.

::

    .venv/bin/python -m benchmarks.read_speed --rounds 7 \\
        before=runs/icesink-none-r0/warehouse after=.../warehouse parquet=runs/parquet-r0/output

Each ``label=folder`` names a folder holding a write's data files (every ``*.parquet``
under it, Iceberg metadata and Spark's checkpoints aside). Per round, each folder in turn
(so that a noisy moment does not fall on one of them only) is read in full twice:

* ``pyarrow``: ``pyarrow.parquet.read_table`` of every file, every column (what a Python
  reader of the table does: pyiceberg's scans read with it);
* ``duckdb``: one query over the files that aggregates every column (``count`` of each,
  ``max`` of each), the way a query engine reads them, on DuckDB's own Parquet reader.

Reported per folder: files, megabytes, the median seconds of each reader and its ratio to
the first folder's.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq


def data_files(folder: Path) -> list[Path]:
    """The Parquet data files under ``folder`` (not under a ``metadata`` folder)."""
    return sorted(p for p in folder.rglob("*.parquet") if "metadata" not in p.parts)


def read_with_pyarrow(files: list[Path]) -> float:
    start = time.perf_counter()
    for path in files:
        pq.read_table(path)
    return time.perf_counter() - start


def read_with_duckdb(files: list[Path]) -> float:
    names = pq.read_schema(files[0]).names
    columns = ", ".join(f'count("{n}"), max("{n}")' for n in names)
    listed = ", ".join(f"'{path}'" for path in files)
    connection = duckdb.connect()
    start = time.perf_counter()
    connection.sql(f"SELECT {columns} FROM read_parquet([{listed}], union_by_name = true)").fetchall()
    seconds = time.perf_counter() - start
    connection.close()
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folders", nargs="+", help="label=folder")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    labelled = [(text.split("=", 1)[0], Path(text.split("=", 1)[1])) for text in args.folders]
    files = {label: data_files(folder) for label, folder in labelled}
    for label, found in files.items():
        if not found:
            raise SystemExit(f"no Parquet data file under {label!r}: give the folder the write wrote to")
    times: dict[str, dict[str, list[float]]] = {label: {"pyarrow": [], "duckdb": []} for label in files}
    for _ in range(args.rounds):
        for label, found in files.items():
            times[label]["pyarrow"].append(read_with_pyarrow(found))
            times[label]["duckdb"].append(read_with_duckdb(found))
    first = labelled[0][0]
    medians = {label: {r: statistics.median(s) for r, s in by.items()} for label, by in times.items()}
    print(f"median of {args.rounds} rounds, each folder read in turn")
    print("| write | files | MB | pyarrow s | x first | duckdb s | x first |")
    print("|---|---|---|---|---|---|---|")
    for label, found in files.items():
        size = sum(p.stat().st_size for p in found) / 1e6
        m = medians[label]
        print(
            f"| {label} | {len(found)} | {size:.1f} | {m['pyarrow']:.3f} | "
            f"{m['pyarrow'] / medians[first]['pyarrow']:.2f} | {m['duckdb']:.3f} | "
            f"{m['duckdb'] / medians[first]['duckdb']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
