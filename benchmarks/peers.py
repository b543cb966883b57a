"""icesink against Iceberg's own Spark streaming sink, each against Spark's Parquet sink on its Spark.

``make bench-peers``: the reference workload (``--batches`` Parquet files of
``--rows-per-batch`` NYC-taxi-shaped rows, 64 partition values, one file per micro-batch)
through each contender, every run a fresh process, contenders taking turns round by round
(each round starts with the next one):

* ``icesink-bucket``, ``icesink-none``: :class:`~icesink.IcebergSink` in that
  ``distribution-mode`` (:mod:`benchmarks._contenders`);
* ``iceberg-none``, ``iceberg-hash``, ``iceberg-range``: Iceberg Java's Spark sink,
  ``writeStream.format("iceberg")`` with ``fanout-enabled=true``, into a table partitioned
  alike with that ``write.distribution-mode`` (:mod:`benchmarks._peer_writers`);
* ``parquet``: Spark's Parquet file sink, the reference.

Both Iceberg writers commit to the SQL catalog on SQLite (pyiceberg's rows are Java's
``JdbcCatalog``'s). Every writer runs on the Spark of Iceberg's runtime jar by default: the
virtual environment ``make env`` makes for Iceberg Java (``.venv/share/icesink/iceberg-java``),
whose Python finds the project's packages after its own (a ``sitecustomize`` appends the
project's site-packages), so that its pyspark is the one imported. ``NAME@project`` runs a
writer on the project's own Spark instead, against the Parquet sink on that Spark.

Per contender: rows/s (rows over the query's wall time), data files and their size
(median, min), and the rows/s of a DuckDB full scan of the written files (every column
aggregated, median of ``--read-repeats``), each as the median of the per-round ratios to
the Parquet sink on the same Spark; then each icesink contender's rows/s over each Iceberg
one's, per round. A run that fails is reported with its error, the others go on::

    .venv/bin/python -m benchmarks.peers --rounds 3 --out peers.json
    .venv/bin/python -m benchmarks.peers --render peers.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from benchmarks._peers_report import markdown
from benchmarks._peers_summary import ICEBERG_WRITERS, Contender, parse_contenders, round_order

ROOT = Path(__file__).resolve().parents[1]
ICEBERG_HOME = ROOT / ".venv" / "share" / "icesink" / "iceberg-java"
DEFAULT_CONTENDERS = "icesink-bucket,icesink-none,iceberg-none,iceberg-hash,iceberg-range,parquet"
DEFAULT_WORKDIR = Path("/tmp") / "icesink-bench"
RUN_TIMEOUT_S = 1800
"""A run's bounded wait: 10 million rows take 1-3 minutes here."""
ERROR_CHARS = 1500


def runtime_command(runtime: str, workdir: Path) -> tuple[list[str], dict[str, str]]:
    """The Python that runs a child on ``runtime``, and its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    if runtime == "project":
        return [sys.executable], {**env, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}
    python = ICEBERG_HOME / "venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no Iceberg Java virtual environment in {ICEBERG_HOME}: run make env")
    # Its own site-packages first (its pyspark), then the project's (icesink's dependencies).
    hook = workdir / "iceberg-runtime"
    hook.mkdir(parents=True, exist_ok=True)
    project_packages = sysconfig.get_paths()["purelib"]
    (hook / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({project_packages!r})\n")
    return [str(python)], {
        **env,
        "PYTHONPATH": f"{hook}{os.pathsep}{ROOT}",
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),
    }


def run_peers(args: argparse.Namespace) -> dict[str, Any]:
    """The parent: the input made once, then ``--rounds`` rounds of one fresh process per contender."""
    contenders = parse_contenders(args.contenders)
    workdir: Path = args.workdir.resolve()
    shape = ["--rows-per-batch", str(args.rows_per_batch), "--batches", str(args.batches)]
    shape += ["--workdir", str(workdir)]
    # The input is written by a process of its own (the throughput benchmark's), so no run pays for it.
    subprocess.run([sys.executable, "-m", "benchmarks.run", *shape, "--fresh-prepare"], check=True)
    load_start = os.getloadavg()
    result: dict[str, Any] = {
        "config": {
            "rows_per_batch": args.rows_per_batch,
            "batches": args.batches,
            "rounds": args.rounds,
            "read_repeats": args.read_repeats,
            "contenders": [c.name for c in contenders],
        },
        "load_average_start": [round(x, 2) for x in load_start],
        "runs": [],
    }
    out_dir = workdir / f"peers-{os.getpid()}"
    for round_no in range(args.rounds):
        for contender in round_order(contenders, round_no):
            result["runs"].append(_child(args, contender, round_no, shape, out_dir))
            result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
            if args.out:  # after each run, so that an interrupted benchmark keeps what it measured
                args.out.write_text(json.dumps(result, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


def _child(
    args: argparse.Namespace, contender: Contender, round_no: int, shape: list[str], out_dir: Path
) -> dict[str, Any]:
    out = out_dir / f"{contender.name}-r{round_no}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    python, env = runtime_command(contender.runtime, args.workdir.resolve())
    command = [*python, "-m", "benchmarks.peers", *shape, "--child", contender.writer]
    command += ["--read-repeats", str(args.read_repeats), "--out", str(out)]
    load = round(os.getloadavg()[0], 2)
    started = time.perf_counter()
    done = subprocess.run(
        command, check=False, env=env, cwd=ROOT, stdout=sys.stderr, stderr=subprocess.PIPE, text=True,
        timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    base = {"contender": contender.name, "round": round_no, "load": load}
    if done.returncode != 0 or not out.exists():
        sys.stderr.write(done.stderr[-ERROR_CHARS * 4 :])
        error = _error_line(done.stderr)
        print(f"round {round_no + 1} {contender.name}: failed: {error}", file=sys.stderr, flush=True)
        return {**base, "ok": False, "error": error}
    run: dict[str, Any] = {**base, "ok": True, **json.loads(out.read_text())}
    run["process_s"] = round(time.perf_counter() - started, 1)
    print(
        f"round {round_no + 1} {contender.name} (Spark {run['spark']}): {run['rows_per_s']:,} rows/s, "
        f"{run['files']['count']} files, read {run['read_rows_per_s']:,} rows/s, load {load} -> "
        f"{os.getloadavg()[0]:.1f}",
        file=sys.stderr,
        flush=True,
    )
    return run


def _error_line(stderr: str) -> str:
    """The last lines of a failed run that name an error (Java's or Python's), shortened."""
    lines = [line.strip() for line in stderr.splitlines() if "Error: " in line or "Exception: " in line]
    return lines[-1][:ERROR_CHARS] if lines else stderr[-ERROR_CHARS:]


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """One run of one writer in this (new) process, then a DuckDB scan of what it wrote."""
    import pyspark

    from benchmarks._contenders import CONTENDERS
    from benchmarks._peer_writers import data_files, iceberg_conf, read_seconds, run_iceberg
    from benchmarks._session import _jvm_pid, _session, _stream
    from benchmarks._stream import Layout

    jars = ICEBERG_HOME / "jars"
    # Every writer on the Iceberg runtime's Spark gets the same session, its jars included.
    conf = iceberg_conf(jars) if pyspark.__version__.startswith(_runtime_spark(jars)) else {}
    spark = _session("local[2]", conf)
    workdir: Path = args.workdir.resolve()
    stream = _stream(spark, workdir, args.batches, args.rows_per_batch, Layout(64))
    run_dir = workdir / f"peers-run-{os.getpid()}"
    run_dir.mkdir(parents=True)
    writers = {name: run_iceberg(name.removeprefix("iceberg-")) for name in ICEBERG_WRITERS}
    writer = writers.get(args.child) or CONTENDERS[args.child]
    result = writer(stream, run_dir, _jvm_pid(spark))
    spark.stop()
    files = data_files(run_dir, args.child)
    read_s = read_seconds(files, args.read_repeats)
    shutil.rmtree(run_dir, ignore_errors=True)
    return {
        "spark": pyspark.__version__,
        "seconds": round(result.seconds, 3),
        "rows": result.rows,
        "rows_per_s": round(result.rows_per_s),
        "files": result.files,
        "read_seconds": round(read_s, 3),
        "read_rows_per_s": round(result.rows / read_s),
        "cpu_seconds": result.probe.cpu_seconds,
        "trigger_ms": result.trigger_ms,
    }


def _runtime_spark(jars: Path) -> str:
    """The Spark version of Iceberg's runtime jar in ``jars`` (``4.1.``), or ``"-"`` when none."""
    runtimes = sorted(jars.glob("iceberg-spark-runtime-*_*.jar"))
    return runtimes[0].name.removeprefix("iceberg-spark-runtime-").split("_")[0] + "." if runtimes else "-"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches (one input file each)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--contenders",
        default=DEFAULT_CONTENDERS,
        help="comma-separated; NAME@project: on the project's Spark",
    )
    parser.add_argument("--read-repeats", type=int, default=3, help="DuckDB scans of each run's files")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="inputs are kept here by shape")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--render", type=Path, help="print the tables of an earlier --out file and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.child:
        args.out.write_text(json.dumps(run_child(args), indent=2))
        return 0
    try:
        parse_contenders(args.contenders)
    except ValueError as e:
        raise SystemExit(str(e)) from e
    result = json.loads(args.render.read_text()) if args.render else run_peers(args)
    print(markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
