"""Throughput of icesink against Spark's Parquet sink, Spark's noop sink and a naive pyiceberg sink.

One invocation streams the same input through every contender, ``--repeats`` times,
round-robin (repeat 1: every contender, then repeat 2: every contender, ...), so that a
machine's drifting load hits all alike. The input is the reference workload
(:mod:`streaming_jobs.taxi_workload`), ``--batches`` Parquet files of
``--rows-per-batch`` rows, read with ``maxFilesPerTrigger=1`` and
``trigger(availableNow=True)``: one micro-batch per file. Contenders:

* ``icesink-bucket``, ``icesink-hash``, ``icesink-none``: :class:`~sink.IcebergSink` with
  that ``distribution-mode``, partitioned by ``day(tpep_pickup_datetime),
  bucket(16, PULocationID)`` (64 partition values), default options otherwise;
* ``parquet``: Spark's Parquet file sink, ``partitionBy("day", "bucket")`` over
  ``to_date(pickup)`` and ``pmod(hash(PULocationID), 16)`` (Spark's hash, not Iceberg's:
  the same number of partition values);
* ``noop``: Spark's ``noop`` sink, which reads every row and writes nothing: the floor;
* ``mapinarrow-count``: ``foreachBatch`` counting the rows in ``mapInArrow``: the floor
  of any design that hands rows to Python as Arrow;
* ``mapinarrow-count-unchecked``: the same without Spark's byte check on every row, as
  icesink's write jobs run after a sink's first batch (:mod:`sink.write.arrow_input`);
* ``pyiceberg-naive``: ``foreachBatch(lambda df, i: table.append(df.toArrow()))``.

Each run has a fresh checkpoint and output, and must write exactly the rows it read
(checked). Reported per contender: median rows/s (rows over the wall time from
``start()`` to the end of ``awaitTermination()``), the median over repeats of the ratio
to the Parquet sink's run of the same repeat, rows per CPU second (driver, JVM and
Python workers), peak resident memory of the Python driver, of its JVM and of the
largest Python worker (sampled from ``/proc``), data files written, the time of each
``foreachBatch`` call and of each commit (p50/p99 over all batches of all repeats), and
for icesink the time of each step from its metrics. One warm-up run per contender on a
small input comes first and is not counted. Run with::

    .venv/bin/python -m benchmarks.run --repeats 3 --out results.json

``--fresh-process`` instead runs every contender run in a new process of its own, with
no warm-up, as a new job starts (:mod:`benchmarks._fresh`)::

    .venv/bin/python -m benchmarks.run --fresh-process --contenders icesink-bucket,icesink-none,parquet

``--scaling`` instead runs a matrix (rows per batch, partition values, ``local[1]`` vs
``local[2]``), each setting in its own process (a master cannot change within one
Spark application), and reports how the cost grows::

    .venv/bin/python -m benchmarks.run --scaling --out scaling.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from benchmarks._contenders import CONTENDERS, Layout, Stream
from benchmarks._probes import percentile
from sink.metric_families import STEPS
from streaming_jobs.spark import with_class_archive
from streaming_jobs.taxi_workload import write_files

DEFAULT_CONTENDERS = tuple(CONTENDERS)
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench"
WARM_UP_BATCHES, WARM_UP_ROWS = 2, 5_000
REFERENCE = "parquet"
NAIVE = "pyiceberg-naive"

#: The scaling matrix: (setting, rows per batch, batches, partition values, master). Each
#: varies one thing from the base row (1M rows per batch, 64 values, local[2]).
SCALING = (
    ("base", 1_000_000, 4, 64, "local[2]"),
    ("rows-10k", 10_000, 20, 64, "local[2]"),
    ("rows-100k", 100_000, 10, 64, "local[2]"),
    ("values-512", 1_000_000, 4, 512, "local[2]"),
    ("values-4096", 1_000_000, 4, 4096, "local[2]"),
    ("local-1", 1_000_000, 4, 64, "local[1]"),
    ("rows-5M", 5_000_000, 2, 64, "local[2]"),
)
DEFAULT_SCALING_CONTENDERS = ("icesink-bucket", "parquet", "noop", "mapinarrow-count", "pyiceberg-naive")


def _session(master: str, conf: Mapping[str, str] | None = None) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    options = with_class_archive(dict(conf or {}))  # as the jobs' session: Spark's classes mapped
    spark = (
        SparkSession.builder.master(master)
        .appName("icesink-throughput")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config(map=dict(options))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _jvm_pid(spark: SparkSession) -> int:
    jvm: Any = spark.sparkContext._jvm
    return int(jvm.java.lang.ProcessHandle.current().pid())


def _stream(
    spark: SparkSession, workdir: Path, batches: int, rows: int, layout: Layout, row_groups: int = 1
) -> Stream:
    started = time.perf_counter()
    name = f"input-{batches}x{rows}" + (f"-rg{row_groups}" if row_groups > 1 else "")
    source = write_files(spark, workdir / name, batches, rows, row_groups)
    seconds = time.perf_counter() - started
    if seconds > 1:
        _log(f"generated {batches} x {rows:,} rows in {source} ({seconds:.0f} s)")
    schema = spark.read.parquet(str(source)).schema
    return Stream(spark, source, schema, layout, rows * batches, batches)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_contenders(args: argparse.Namespace) -> dict[str, Any]:
    """The round-robin runs of one invocation, and their summary."""
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contenders {unknown}; choose from {list(CONTENDERS)}")
    workdir: Path = args.workdir.resolve()
    runs_dir = workdir / f"runs-{os.getpid()}"
    layout = Layout(args.partition_values)
    load_start = os.getloadavg()
    spark = _session(args.master)
    jvm_pid = _jvm_pid(spark)
    stream = _stream(spark, workdir, args.batches, args.rows_per_batch, layout, args.row_groups_per_file)
    warm_up = _stream(spark, workdir, WARM_UP_BATCHES, WARM_UP_ROWS, layout)
    for name in names:  # JIT, Python worker imports, icesink's once-per-application self-checks
        run_dir = runs_dir / f"warm-up-{name}"
        run_dir.mkdir(parents=True)
        CONTENDERS[name](warm_up, run_dir, jvm_pid)
        shutil.rmtree(run_dir, ignore_errors=True)
    _log(f"warm-up done; {args.repeats} x {names} on {stream.rows:,} rows, load {load_start}")
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for name in names:
            run_dir = runs_dir / f"{name}-r{repeat}"
            run_dir.mkdir(parents=True)
            result = CONTENDERS[name](stream, run_dir, jvm_pid)
            if not args.keep_outputs:
                shutil.rmtree(run_dir, ignore_errors=True)
            runs.append({"repeat": repeat, **result.to_json()})
            _log(
                f"repeat {repeat + 1}/{args.repeats} {name}: {result.seconds:.1f} s, "
                f"{result.rows_per_s:,.0f} rows/s, load {os.getloadavg()[0]:.1f}"
            )
    spark.stop()
    if not args.keep_outputs:
        shutil.rmtree(runs_dir, ignore_errors=True)
    return {
        "config": {
            "rows_per_batch": args.rows_per_batch,
            "batches": args.batches,
            "rows": stream.rows,
            "repeats": args.repeats,
            "master": args.master,
            "partition_values": layout.partition_values,
            "partition_by": layout.partition_by,
            "row_groups_per_file": args.row_groups_per_file,
            "contenders": names,
        },
        "machine": _machine(load_start, os.getloadavg()),
        "summary": summarize(runs, names),
        "runs": runs,
    }


def _machine(load_start: Sequence[float], load_end: Sequence[float]) -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("pyspark", "pyiceberg", "pyarrow")},
        "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in load_end],
    }


def summarize(runs: list[dict[str, Any]], names: Sequence[str]) -> list[dict[str, Any]]:
    """Per contender, from the runs as written to JSON (so that ``--render`` recomputes it)."""
    repeats: dict[int, dict[str, dict[str, Any]]] = {}
    for run in runs:
        repeats.setdefault(run["repeat"], {})[run["contender"]] = run
    return [_summarize(name, list(repeats.values())) for name in names]


def _summarize(name: str, repeats: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    mine = [r[name] for r in repeats]
    ratios = [r[name]["rows_per_s"] / r[REFERENCE]["rows_per_s"] for r in repeats if REFERENCE in r]
    # A negative figure is a worker that ended during the run, counted by a probe that
    # did not yet keep its last sample: such a run's CPU time is not known.
    cpu = [r["rows"] / sum(r["cpu_seconds"].values()) for r in mine if min(r["cpu_seconds"].values()) >= 0]
    batches = [s for r in mine for s in r["batch_seconds"]]
    commits = [s for r in mine for s in r["commit_seconds"]]
    memory = [r["memory"] for r in mine]
    summary: dict[str, Any] = {
        "contender": name,
        "median_rows_per_s": round(statistics.median(r["rows_per_s"] for r in mine)),
        "rows_per_s": [r["rows_per_s"] for r in mine],
        "ratio_to_parquet": round(statistics.median(ratios), 3) if ratios else None,
        "ratios_to_parquet": [round(x, 3) for x in ratios],
        "median_rows_per_cpu_s": round(statistics.median(cpu)) if cpu else None,
        "median_cpu_seconds": {
            k: round(statistics.median(r["cpu_seconds"][k] for r in mine), 1) for k in mine[0]["cpu_seconds"]
        },
        "median_worker_system_seconds": round(
            statistics.median(r.get("worker_system_seconds", 0.0) for r in mine), 1
        ),
        # Peaks carry what earlier runs left in a process (the driver keeps the naive
        # sink's Arrow memory, the JVM its heap): the growth during the run says what
        # this contender added.
        "driver_peak_rss_bytes": max(m["driver_peak_rss_bytes"] for m in memory),
        "driver_growth_rss_bytes": max(
            m["driver_peak_rss_bytes"] - m["driver_start_rss_bytes"] for m in memory
        ),
        "jvm_peak_rss_bytes": max(m["jvm_peak_rss_bytes"] for m in memory),
        "worker_peak_rss_bytes": max(m["worker_peak_rss_bytes"] for m in memory),
        "files": mine[-1]["files"],
    }
    if batches:
        summary["batch_seconds_p50_p99"] = [
            round(percentile(batches, 50), 3),
            round(percentile(batches, 99), 3),
        ]
    if commits:
        summary["commit_seconds_p50_p99"] = [
            round(percentile(commits, 50), 3),
            round(percentile(commits, 99), 3),
        ]
    if mine[0]["step_seconds"]:
        steps = {s: statistics.median(r["step_seconds"][s] for r in mine) for s in STEPS}
        # Inside foreachBatch but in no timed step (replay check, table load, staging,
        # dead letters); outside foreachBatch: Spark's own work per trigger (planning,
        # listing the source, offset and commit logs).
        steps["rest_of_foreach_batch"] = statistics.median(
            sum(r["batch_seconds"]) - sum(r["step_seconds"].values()) for r in mine
        )
        steps["outside_foreach_batch"] = statistics.median(
            r["seconds"] - sum(r["batch_seconds"]) for r in mine
        )
        summary["median_step_seconds"] = {k: round(v, 2) for k, v in steps.items()}
        phases = [t for r in mine for t in r.get("task_seconds", [])]
        if phases:  # the longest write task's, per batch
            summary["median_task_seconds"] = {
                p: round(statistics.median(t[p] for t in phases), 2) for p in phases[0]
            }
        summary["median_seconds"] = round(statistics.median(r["seconds"] for r in mine), 2)
    return summary


# --- Markdown ---------------------------------------------------------------------------------


def _mib(n: int | None, zero: str = "-") -> str:
    return f"{n / 2**20:,.0f} MiB" if n else zero


def _size(n: int) -> str:
    return f"{n / 2**20:.2f}" if n >= 2**20 / 100 else f"{n / 2**10:.1f} KiB"


def _ms(pair: Sequence[float] | None) -> str:
    return f"{pair[0] * 1000:,.0f} / {pair[1] * 1000:,.0f} ms" if pair else "-"


def markdown(result: dict[str, Any]) -> str:
    """The summary as the Markdown tables of ``benchmarks/README.md``."""
    c = result["config"]
    lines = [
        f"{c['batches']} micro-batches x {c['rows_per_batch']:,} rows, {c['partition_values']} partition "
        f"values ({c['partition_by']}), {c['master']}, "
        f"{c.get('row_groups_per_file', 1)} row group(s) per input file, "
        f"median of {c['repeats']} round-robin repeats; "
        f"load average {result['machine']['load_average_start'][0]} at the start, "
        f"{result['machine']['load_average_end'][0]} at the end",
        "",
        "| contender | median rows/s | x Parquet sink | rows per CPU s "
        "| driver peak RSS: Python (+ growth in the run) / JVM "
        "| largest worker peak RSS | files | file size min / median / max (MiB) "
        "| foreachBatch p50 / p99 | commit p50 / p99 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        files = s["files"]
        sizes = f"{_size(files['min'])} / {_size(files['median'])} / {_size(files['max'])}" if files else "-"
        ratio = f"{s['ratio_to_parquet']:.2f}" if s["ratio_to_parquet"] is not None else "-"
        per_cpu = f"{s['median_rows_per_cpu_s']:,}" if s["median_rows_per_cpu_s"] else "-"
        lines.append(
            f"| {s['contender']} | {s['median_rows_per_s']:,} | {ratio} | {per_cpu} "
            f"| {_mib(s['driver_peak_rss_bytes'])} (+{_mib(s['driver_growth_rss_bytes'], '0')}) "
            f"/ {_mib(s['jvm_peak_rss_bytes'])} "
            f"| {_mib(s['worker_peak_rss_bytes'])} | {files.get('count', '-') if files else '-'} | {sizes} "
            f"| {_ms(s.get('batch_seconds_p50_p99'))} | {_ms(s.get('commit_seconds_p50_p99'))} |"
        )
    split = [s for s in result["summary"] if "median_step_seconds" in s]
    if split:
        keys = list(split[0]["median_step_seconds"])
        lines += [
            "",
            "icesink, where the time goes (median seconds per run, share of the wall time):",
            "",
            "| contender | wall | " + " | ".join(k.replace("_", " ") for k in keys) + " |",
            "|---|---|" + "---|" * len(keys),
        ]
        for s in split:
            wall = s["median_seconds"]
            cells = [f"{v:.1f} s ({v / wall:.0%})" for v in s["median_step_seconds"].values()]
            lines.append(f"| {s['contender']} | {wall:.1f} s | " + " | ".join(cells) + " |")
    tasks = [s for s in split if "median_task_seconds" in s]
    if tasks:
        lines += [
            "",
            "icesink's write tasks (the longest task of each micro-batch, median over batches; "
            "`icesink_write_task_seconds_max`):",
            "",
            "| contender | input: receiving the rows | close: finishing the files after them |",
            "|---|---|---|",
        ]
        lines += [
            f"| {s['contender']} | {s['median_task_seconds']['input']:.2f} s "
            f"| {s['median_task_seconds']['close']:.2f} s |"
            for s in tasks
        ]
    return "\n".join(lines)


# --- scaling -----------------------------------------------------------------------------------


def _run_in_process(label: str, options: list[str], out: Path) -> dict[str, Any]:
    """``benchmarks.run`` with ``options`` in a process of its own; its results, timed."""
    command = [sys.executable, "-m", "benchmarks.run", *options, "--out", str(out)]
    _log(f"{label}: {' '.join(command[1:])}")
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=sys.stderr)  # its tables are logs here; ours go to stdout
    result: dict[str, Any] = json.loads(out.read_text())
    result["elapsed_s"] = round(time.perf_counter() - started)
    return result


def run_scaling(args: argparse.Namespace) -> dict[str, Any]:
    """Each setting of :data:`SCALING` in its own process; their summaries side by side."""
    skip = {s.strip() for s in args.scaling_skip.split(",") if s.strip()}
    settings: list[dict[str, Any]] = []
    out_dir = args.workdir.resolve() / "scaling"
    out_dir.mkdir(parents=True, exist_ok=True)
    for setting, rows, batches, values, master in SCALING:
        if setting in skip:
            continue
        options = [
            "--rows-per-batch", str(rows), "--batches", str(batches), "--partition-values", str(values),
            "--master", master, "--repeats", str(args.scaling_repeats),
            "--contenders", args.scaling_contenders, "--workdir", str(args.workdir),
        ]  # fmt: skip
        result = _run_in_process(f"scaling {setting}", options, out_dir / f"{setting}.json")
        result["setting"] = setting
        settings.append(result)
        if args.out:  # after each setting, so that an interrupted matrix keeps what it measured
            args.out.write_text(json.dumps({"scaling": settings}, indent=2))
    return {"scaling": settings}


def run_memory(args: argparse.Namespace) -> dict[str, Any]:
    """Each contender alone in a fresh process, so that its peaks are its own; side by side."""
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    out_dir = args.workdir.resolve() / "memory"
    out_dir.mkdir(parents=True, exist_ok=True)
    contenders: list[dict[str, Any]] = []
    for name in names:
        options = [
            "--rows-per-batch", str(args.rows_per_batch), "--batches", str(args.batches),
            "--partition-values", str(args.partition_values), "--master", args.master,
            "--repeats", "1", "--contenders", name, "--workdir", str(args.workdir),
        ]  # fmt: skip
        contenders.append(_run_in_process(f"memory {name}", options, out_dir / f"{name}.json"))
    return {"memory": contenders}


def scaling_markdown(scaling: dict[str, Any]) -> str:
    """One row per setting; per contender rows/s, x Parquet sink and microseconds per row."""
    settings = scaling["scaling"]
    names = settings[0]["config"]["contenders"]
    lines = [
        "| setting | batches x rows | partition values | master | load avg (start / end) | "
        + " | ".join(f"{n} rows/s (x Parquet, µs/row)" for n in names)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for s in settings:
        c, m = s["config"], s["machine"]
        cells = []
        for summary in s["summary"]:
            ratio = summary["ratio_to_parquet"]
            cells.append(
                f"{summary['median_rows_per_s']:,} ({ratio:.2f}x, {1e6 / summary['median_rows_per_s']:.1f})"
                if ratio is not None
                else f"{summary['median_rows_per_s']:,}"
            )
        lines.append(
            f"| {s['setting']} | {c['batches']} x {c['rows_per_batch']:,} | {c['partition_values']} "
            f"| {c['master']} | {m['load_average_start'][0]} / {m['load_average_end'][0]} | "
            + " | ".join(cells)
            + " |"
        )
    return "\n".join(lines)


def memory_markdown(memory: dict[str, Any]) -> str:
    """One row per contender run alone: its driver's peaks, and their ratio to the naive sink's."""
    runs = [(r, r["summary"][0]) for r in memory["memory"]]
    naive = next((s for _, s in runs if s["contender"] == NAIVE), None)

    def ratio(s: dict[str, Any], *keys: str) -> str:
        if naive is None:
            return "-"
        return f"{sum(s[k] for k in keys) / sum(naive[k] for k in keys):.2f}"

    lines = [
        "| contender | load avg (start / end) | driver peak RSS: Python (+ growth in the run) "
        "| x naive | driver JVM peak RSS | x naive | Python + JVM, x naive |",
        "|---|---|---|---|---|---|---|",
    ]
    for r, s in runs:
        m = r["machine"]
        lines.append(
            f"| {s['contender']} | {m['load_average_start'][0]} / {m['load_average_end'][0]} "
            f"| {_mib(s['driver_peak_rss_bytes'])} (+{_mib(s['driver_growth_rss_bytes'], '0')}) "
            f"| {ratio(s, 'driver_peak_rss_bytes')} | {_mib(s['jvm_peak_rss_bytes'])} "
            f"| {ratio(s, 'jvm_peak_rss_bytes')} "
            f"| {ratio(s, 'driver_peak_rss_bytes', 'jvm_peak_rss_bytes')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=10, help="micro-batches (one input file each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS), help="comma-separated")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--partition-values", type=int, default=64, help="64 (the reference), or 4 x N buckets of route_key"
    )
    parser.add_argument(
        "--row-groups-per-file",
        type=int,
        default=1,
        help="cut each input file into about this many row groups: Spark reads a file in as many tasks "
        "as it has row groups, up to one per core (1: one task per micro-batch)",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="inputs are kept here by shape")
    parser.add_argument("--keep-outputs", action="store_true", help="keep each run's output and checkpoint")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--scaling", action="store_true", help="run the scaling matrix instead")
    parser.add_argument("--scaling-contenders", default=",".join(DEFAULT_SCALING_CONTENDERS))
    parser.add_argument("--scaling-repeats", type=int, default=2)
    parser.add_argument("--scaling-skip", default="", help=f"settings to skip, of {[s[0] for s in SCALING]}")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="run each contender alone in a fresh process, one repeat, and compare the driver's peaks",
    )
    parser.add_argument(
        "--fresh-process",
        action="store_true",
        help="run every contender run in a new process of its own, no warm-up, round-robin "
        "(and, each round, the one-process mode once, for comparison)",
    )
    parser.add_argument(
        "--fresh-no-warm", action="store_true", help="with --fresh-process: skip the one-process runs"
    )
    parser.add_argument("--fresh-prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--fresh-child", choices=list(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--fresh-repeat", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--fresh-spawned-at", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--render", type=Path, help="print the tables of an earlier --out file and exit")
    args = parser.parse_args(argv)
    if args.fresh_prepare or args.fresh_child or args.fresh_process:
        return _main_fresh(args)
    if args.render:
        earlier = json.loads(args.render.read_text())
        if earlier.get("config", {}).get("mode") == "fresh-process":
            return _main_fresh(args, earlier)
        for result in earlier.get("scaling", earlier.get("memory", [earlier])):
            result["summary"] = summarize(result["runs"], result["config"]["contenders"])
        if "scaling" in earlier:
            print(scaling_markdown(earlier))
        else:
            print(memory_markdown(earlier) if "memory" in earlier else markdown(earlier))
        return 0
    if args.scaling:
        result = run_scaling(args)
        text = scaling_markdown(result)
    elif args.memory:
        result = run_memory(args)
        text = memory_markdown(result)
    else:
        result = run_contenders(args)
        text = markdown(result)
    print(text, flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


def _main_fresh(args: argparse.Namespace, earlier: dict[str, Any] | None = None) -> int:
    """``--fresh-process`` (the parent), its children, or ``--render`` of its results."""
    from benchmarks import _fresh

    if args.fresh_prepare:
        _fresh.prepare(args)
        return 0
    if args.fresh_child:
        args.out.write_text(json.dumps(_fresh.run_child(args), indent=2))
        return 0
    result = earlier if earlier is not None else _fresh.run_fresh(args)
    result["summary"] = summarize(result["runs"], result["config"]["contenders"])
    if "warm" in result:
        result["warm"]["summary"] = summarize(result["warm"]["runs"], result["config"]["contenders"])
    print(_fresh.fresh_markdown(result), flush=True)
    if args.out and earlier is None:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
