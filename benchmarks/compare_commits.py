"""Same-run A/B of two commits: one benchmark of each, alternating, in fresh processes.

::

    # the reference workload, bucket and none modes against Spark's Parquet sink (about 10 min)
    .venv/bin/python -m benchmarks.compare_commits A B --rounds 3 --rotate \\
        --contenders icesink-bucket,icesink-none,parquet --batches 10
    # 200 topics routed to 200 tables against one topic into one table (about 11 min)
    .venv/bin/python -m benchmarks.compare_commits A B --benchmark routing --rounds 2 --rotate \\
        -- --topics 200 --messages-per-topic 500 --single-messages 100000 --max-offsets 25000 --rounds 2
    # upserts: batches of 20,000 changes into a table of 1M rows (about 10 min)
    .venv/bin/python -m benchmarks.compare_commits A B --benchmark upsert --rounds 3 --rotate \\
        -- --rows 1000000 --batches 10 --batch-size 20000 --read-repeats 1

Each commit is checked out into a detached worktree under ``--workdir``. Every round runs
the benchmark (``--benchmark``: ``run``, ``routing`` or ``upsert``, see
:mod:`benchmarks._ab_benchmarks`) of the first commit, then of the second, each a new
process of this environment's Python with that worktree first on ``PYTHONPATH`` and as its
folder, so each runs its own ``sink`` and its own benchmark; the process reports the file of
the ``sink`` package it imported, and a run whose ``sink`` is not its commit's stops the A/B.
Arguments this module does not know, and all after ``--``, go to the benchmark as they are
(after ``--`` for one this module also has, such as ``routing_tables``' own ``--rounds``:
its rounds within one process). With ``--rotate`` every other round runs the second commit
first, and each round of a benchmark with contenders starts with the next one (the first
of a process runs on the least warm JVM). Each run's output is kept under ``--workdir``; its
temporary files (``TMPDIR``) are removed after it.

The summary, per figure of the benchmark (rates, CPU seconds, a batch's steps), is each
commit's median, the median of the per-round ratios B/A (B's run over A's in the same
round) and each round's figures; then each run's load average at its start, its time
and its ``sink``. A difference is real when the per-round ratios stay on one side of 1.0
by more than their spread between rounds.

Sizes for a 2-core machine (the times: estimates for a quiet one, from the figures in
``benchmarks/LOG.md``):

* ``run``: ``--batches 10`` of the default 1M rows and three contenders, about 1.5 min a
  process (JVM start and a warm-up run per contender included); the inputs are made once,
  in ``--workdir/inputs``, and shared by every run.
* ``routing``: every process produces its own topics first (about 0.3 ms a message, not
  timed) and warms up on a tenth of them, so fewer messages per topic, not fewer topics:
  200 tables keep each table's driver work (its batch, replay check and commit) the subject.
  500 messages a topic in micro-batches of 25,000 offsets make 4 micro-batches a run, 3 of
  them into tables that exist; 100,000 messages for the single table; two rounds within
  each process. About 2.5-3 min a process.
* ``upsert``: 1M rows in 16 buckets, then 10 batches of 20,000 changes (the first a
  warm-up, not counted): each batch's lookup reads every data file of the table, a few
  dozen growing to a few hundred as the batches add theirs, as in a stream between two
  compactions. With much smaller tables or batches a batch is mostly Spark's fixed cost
  per job; fewer than 6 batches make a median of too few. About 1.5 min a process;
  pyiceberg is left out (``--pyiceberg-batches 0``, set here). It times the upsert modules
  (``icesink.upsert``, the write tasks) called directly, not ``IcebergSink``'s micro-batch
  around them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._ab_benchmarks import BENCHMARKS, Benchmark
from benchmarks._ab_summary import Run, figure_rows, markdown

DEFAULT_WORKDIR = Path("/tmp/icesink-bench-ab")
SINK_LINE = "compare_commits: sink "
# Runs the benchmark as ``python -m`` would, then says which sink module it imported (``sink.sink``
# in a checkout from before the library became the ``icesink`` package).
_LAUNCHER = f"""\
import runpy, sys
module, sys.argv = sys.argv[1], sys.argv[1:]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
finally:
    sink = sys.modules.get("icesink.sink") or sys.modules.get("sink.sink")
    print({SINK_LINE!r} + str(getattr(sink, "__file__", None)), flush=True)
"""


def main(argv: list[str] | None = None) -> int:
    args, passed = _arguments(sys.argv[1:] if argv is None else argv)
    benchmark = BENCHMARKS[args.benchmark]
    repo = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    base, head = (_resolve(repo, c) for c in (args.base, args.head))
    trees = {commit: _worktree(repo, args.workdir, commit) for commit in (base, head)}
    runs: list[Run] = []
    for round_no in range(1, args.rounds + 1):
        order = round_order(base, head, round_no, args.rotate)
        contenders = round_contenders(args.contenders or benchmark.contenders, round_no, args.rotate)
        for position, commit in enumerate(order, start=1):
            run = _run(benchmark, trees[commit], commit, round_no, position, contenders, passed, args.workdir)
            runs.append(run)
            print(f"round {round_no}, {commit[:7]}: {run.seconds:.0f} s, {run.figures}", flush=True)
    print(markdown(base, head, runs))
    if args.out:
        rows = [row.as_dict() for row in figure_rows(base, head, runs)]
        result = {"benchmark": args.benchmark, "base": base, "head": head, "passed": passed}
        args.out.write_text(
            json.dumps({**result, "figures": rows, "runs": [vars(r) for r in runs]}, indent=2)
        )
    return 0


def _arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """This module's options, and the benchmark's: those not known here and all after ``--``."""
    own, after = (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    p.add_argument("base", help="commit A, measured first in each round (second with --rotate, every other)")
    p.add_argument("head", help="commit B")
    p.add_argument("--benchmark", choices=sorted(BENCHMARKS), default="run")
    p.add_argument("--rounds", type=int, default=3, help="rounds of the A/B: one process per commit each")
    p.add_argument(
        "--contenders",
        type=lambda v: tuple(n.strip() for n in v.split(",") if n.strip()),
        help="the benchmark's contenders, comma-separated (run, routing; default: the benchmark's)",
    )
    p.add_argument(
        "--rotate",
        action="store_true",
        help="every other round runs B first, and each round starts with the next contender",
    )
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    p.add_argument("--out", type=Path, help="write the figures and the runs as JSON here")
    args, unknown = p.parse_known_args(own)
    args.workdir = args.workdir.resolve()  # the runs' folders are their checkouts
    if args.contenders and not BENCHMARKS[args.benchmark].contenders:
        p.error(f"--contenders: the {args.benchmark} benchmark has none")
    return args, unknown + after


def round_order(base: str, head: str, round_no: int, rotate: bool) -> tuple[str, str]:
    """The commits in the order round ``round_no`` (from 1) runs them."""
    return (head, base) if rotate and round_no % 2 == 0 else (base, head)


def round_contenders(names: tuple[str, ...], round_no: int, rotate: bool) -> str:
    """The contenders of a round, in the order they run, comma-separated."""
    if not names:
        return ""
    first = (round_no - 1) % len(names) if rotate else 0
    return ",".join(names[first:] + names[:first])


def _resolve(repo: Path, ref: str) -> str:
    return subprocess.check_output(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{ref}^{{commit}}"], text=True
    ).strip()


def _worktree(repo: Path, workdir: Path, commit: str) -> Path:
    tree = workdir / commit[:12]
    if not tree.exists():
        add = ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tree), commit]
        subprocess.check_call(add)
    return tree


def _run(
    benchmark: Benchmark,
    tree: Path,
    commit: str,
    round_no: int,
    position: int,
    contenders: str,
    passed: list[str],
    workdir: Path,
) -> Run:
    """One fresh process of ``tree``'s benchmark; its figures, load, time and ``sink``."""
    tag = f"{benchmark.module.rsplit('.', 1)[-1]}-{commit[:12]}-{round_no}"
    out, log, scratch = workdir / f"{tag}.json", workdir / f"{tag}.log", workdir / "tmp" / tag
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable, "TMPDIR": str(scratch)}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    command = [sys.executable, "-c", _LAUNCHER, benchmark.module]
    command += benchmark.arguments(contenders, out, workdir) + passed
    print(f"{tree.name}: {' '.join(command[3:])}", flush=True)
    load, started = os.getloadavg()[0], time.perf_counter()
    with log.open("w") as printed:
        code = subprocess.call(command, cwd=tree, env=env, stdout=printed)
    seconds = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    text = log.read_text()
    if code:
        raise SystemExit(f"{tag} exited with {code}: its output is in {log}")
    sink_file = next(
        (line.removeprefix(SINK_LINE) for line in text.splitlines() if line.startswith(SINK_LINE)), ""
    )
    if not Path(sink_file).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tag} ran the sink of {sink_file or 'nowhere'}, not of {tree}: see {log}")
    figures = benchmark.figures(out, text)
    return Run(commit, round_no, position, figures, load, seconds, sink_file)


if __name__ == "__main__":
    raise SystemExit(main())
