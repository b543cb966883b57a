"""Throughput of icesink against Spark's Parquet sink, Spark's noop sink and a naive pyiceberg sink.

One invocation streams the same input through every contender, ``--repeats`` times,
round-robin (repeat 1: every contender, then repeat 2: every contender, ...), so that a
machine's drifting load hits all alike. The input is the reference workload
(:mod:`icesink.jobs.taxi_workload`), ``--batches`` Parquet files of
``--rows-per-batch`` rows, read with ``maxFilesPerTrigger=1`` and
``trigger(availableNow=True)``: one micro-batch per file. Contenders:

* ``icesink-bucket``, ``icesink-hash``, ``icesink-none``: :class:`~icesink.IcebergSink` with
  that ``distribution-mode``, partitioned by ``day(tpep_pickup_datetime),
  bucket(16, PULocationID)`` (64 partition values), default options otherwise;
* ``parquet``: Spark's Parquet file sink, ``partitionBy("day", "bucket")`` over
  ``to_date(pickup)`` and ``pmod(hash(PULocationID), 16)`` (Spark's hash, not Iceberg's:
  the same number of partition values);
* ``noop``: Spark's ``noop`` sink, which reads every row and writes nothing: the floor;
* ``mapinarrow-count``: ``foreachBatch`` counting the rows in ``mapInArrow``: the floor
  of any design that hands rows to Python as Arrow;
* ``mapinarrow-count-unchecked``: the same without Spark's byte check on every row, as
  icesink's write jobs run after a sink's first batch (:mod:`icesink.write.arrow_input`);
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

``--row-groups 1,8 --session project,plain`` with ``--fresh-process`` runs every layout
(input files of 1 or 8 row groups: one read task per micro-batch, or one per core; the
benchmarks' session or a user's plain ``local[2]`` one) in every round, contenders within
each, each ratio to the Parquet sink of the same layout and round::

    .venv/bin/python -m benchmarks.run --fresh-process --fresh-no-warm --row-groups 1,8 \\
        --session project,plain --contenders icesink-bucket,icesink-none,parquet

``--scaling`` instead runs a matrix (rows per batch, partition values, ``local[1]`` vs
``local[2]``), each setting in its own process (a master cannot change within one
Spark application), and reports how the cost grows::

    .venv/bin/python -m benchmarks.run --scaling --out scaling.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._contenders import CONTENDERS
from benchmarks._run_modes import DEFAULT_SCALING_CONTENDERS, SCALING, run_memory, run_scaling
from benchmarks._run_report import markdown, memory_markdown, scaling_markdown
from benchmarks._session import SESSIONS, _jvm_pid, _log, _machine, _stream, session_of
from benchmarks._stream import Layout
from benchmarks._summary import summarize

DEFAULT_CONTENDERS = tuple(CONTENDERS)
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench"
WARM_UP_BATCHES, WARM_UP_ROWS = 2, 5_000


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
    spark = session_of(args.session, args.master)
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
            "session": args.session,
            "contenders": names,
        },
        "machine": _machine(load_start, os.getloadavg()),
        "summary": summarize(runs, names),
        "runs": runs,
    }


def _parser() -> argparse.ArgumentParser:
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
        "--row-groups",
        type=_int_list,
        default=[1],
        help="cut each input file into about this many row groups: Spark reads a file in as many tasks "
        "as it has row groups, up to one per core (1: one task per micro-batch); with --fresh-process "
        "a comma-separated list (1,8) runs each layout in every round",
    )
    parser.add_argument(
        "--session",
        type=_name_list,
        default=["project"],
        help=f"the Spark session, of {list(SESSIONS)}: the benchmarks' own (class archive, UI off) or a "
        "plain one (local master, 2 shuffle partitions, 4g, UTC); with --fresh-process a "
        "comma-separated list runs each in every round",
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
    return parser


def _int_list(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n.strip()]


def _name_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in SESSIONS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"sessions {unknown or text!r} are not of {list(SESSIONS)}")
    return names


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    """The parsed options; a list of layouts or sessions only for ``--fresh-process``, else its one value."""
    args = _parser().parse_args(argv)
    args.layouts = [(g, s) for g in args.row_groups_per_file for s in args.session]
    if len(args.layouts) > 1 and not args.fresh_process:
        raise SystemExit("several --row-groups or --session values need --fresh-process")
    args.row_groups_per_file, args.session = args.layouts[0]
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
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
    for layout in result.get("layouts", [result]):
        layout["summary"] = summarize(layout["runs"], layout["config"]["contenders"])
        if "warm" in layout:
            layout["warm"]["summary"] = summarize(layout["warm"]["runs"], layout["config"]["contenders"])
    text = _fresh.layouts_markdown(result) if "layouts" in result else _fresh.fresh_markdown(result)
    print(text, flush=True)
    if args.out and earlier is None:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
