"""Upserts over a long stream: each batch's cost, the table's files and the readers' scans, plotted.

The sink (``IcebergSink``, ``write.mode=upsert``) as a user runs it, one call per
micro-batch on a session with Spark's default settings, and its own maintenance on as it
is by default for the tables it creates (``--maintenance off`` to compare): batch 0 loads
``--keys`` keys into a table partitioned by ``bucket(--buckets, id)``, then ``--batches``
seeded batches of ``--changes`` random changes (70% updates, 20% inserts, 10% deletes,
:mod:`benchmarks._upsert_changes`). A batch is handed to the sink in memory, as a source's
would be: only the sink's call is timed.

Per batch (:mod:`benchmarks._upsert_sink`): seconds, changes/s, the lookup's seconds, each
timed step's (``icesink_step_duration_seconds``: changes, schema, normalize, route, write,
keys, commit), maintenance's, the delete files it added, and the live data files and delete
files in the table after it. Every ``--scan-every`` batches and after the last: a full scan with pyiceberg
and with DuckDB, each checked against the expected rows, and the same scans of the same rows
written freshly compacted into a copy. ``--pyiceberg-batches N``: a second table of the same files takes
batches 1..N+1 through pyiceberg's ``Table.upsert`` + ``Table.delete`` too (batch 1 warms
both up), for the ratio on batches 2..N+1.

Printed: the summary (:mod:`benchmarks._upsert_windows`: changes/s of the first window,
batches 2..``--window``+1, against the last ``--window`` batches, the goals beside them).
Written to ``--results`` (default ``benchmarks/results/``): ``<name>.json``, every per-batch
record, and ``<name>.png``, the plot (:mod:`benchmarks._upsert_plot`), with every
``--compare`` result drawn beside this run's; the JSON is written after every batch, so a run
cut short keeps what it measured. ``--plot A.json B.json`` prints the summaries of earlier
results and draws them, running nothing. ``--pythonpath DIR`` measures the ``icesink`` of
another checkout (say a worktree of another commit) with this benchmark: the run is a new
process whose ``icesink`` is DIR's, on the driver and in Spark's workers.
``--sink-option key=value`` passes any sink option (``upsert.key-index=false``, say)::

    .venv/bin/python -m benchmarks.upsert_long                      # 10M keys, 300 x 100k changes
    .venv/bin/python -m benchmarks.upsert_long --keys 2000000 --batches 60 --scan-every 20 --window 20
    .venv/bin/python -m benchmarks.upsert_long --small              # 20 x 1,000 changes on 20,000 keys
    .venv/bin/python -m benchmarks.upsert_long --keys 1000000 --batches 40 --pythonpath /tmp/other \\
        --compare benchmarks/results/upsert-long-1m-40x100k.json
    .venv/bin/python -m benchmarks.upsert_long --plot A.json B.json --name a-and-b
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._session import _log, _machine
from benchmarks._upsert_plot import plot
from benchmarks._upsert_windows import WINDOW, summary_text

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RESULTS = REPO_ROOT / "benchmarks" / "results"
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench-upsert-long"
CODE_ROOT_ENV = "ICESINK_BENCH_CODE_ROOT"  # set for the new process of --pythonpath: where icesink must be
SMALL = {"keys": 20_000, "changes": 1_000, "batches": 20, "scan_every": 20, "window": 10}
# Runs the benchmark as ``python -m`` would with DIR's ``icesink`` (DIR is the folder it runs in and
# first on PYTHONPATH; imported first) and this checkout's ``benchmarks`` (first on the path only after).
_LAUNCHER = """\
import runpy, sys
here = sys.argv.pop(1)
import icesink
sys.path.insert(0, here)
runpy.run_module("benchmarks.upsert_long", run_name="__main__", alter_sys=True)
"""


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=10_000_000, help="keys of the initial load")
    p.add_argument("--changes", type=int, default=100_000, help="changes per batch")
    p.add_argument("--batches", type=int, default=300)
    p.add_argument("--buckets", type=int, default=16, help="N of bucket(N, id)")
    p.add_argument("--small", action="store_true", help=f"small CDC batches: {SMALL} unless given")
    p.add_argument("--maintenance", choices=("on", "off"), default="on", help="the sink's own maintenance")
    p.add_argument("--scan-every", type=int, default=50, help="full scans after every N batches and the last")
    p.add_argument("--window", type=int, default=WINDOW, help="batches in the first and the last window")
    p.add_argument(
        "--pyiceberg-batches", type=int, default=1, help="batches after the warm-up also run by pyiceberg"
    )
    p.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE", help="any sink option")
    p.add_argument(
        "--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions (unset: Spark's default)"
    )
    p.add_argument("--seed", type=int, default=18)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--pythonpath", type=Path, help="measure the icesink of this checkout")
    p.add_argument(
        "--label", help="the run's name in the plot (default: the commit measured and the settings)"
    )
    p.add_argument(
        "--name", help="file name of the JSON and the PNG, without suffix (default: from the label)"
    )
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument(
        "--compare", type=Path, nargs="*", default=[], help="earlier results drawn beside this run"
    )
    p.add_argument("--plot", type=Path, nargs="*", help="draw these results only, run nothing")
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    args = p.parse_args(argv)
    given = set(argv if argv is not None else sys.argv[1:])
    for key, value in SMALL.items() if args.small else ():
        if f"--{key.replace('_', '-')}" not in given:
            setattr(args, key, value)
    if args.small and "--pyiceberg-batches" not in given:
        args.pyiceberg_batches = 0
    if not 0 <= args.pyiceberg_batches < args.batches:
        p.error("--pyiceberg-batches must be 0 (icesink only) or more, and less than --batches")
    for name in ("results", "workdir", "pythonpath"):
        if getattr(args, name) is not None:
            setattr(args, name, getattr(args, name).resolve())
    args.compare = [c.resolve() for c in args.compare]
    return args


def _count(n: int) -> str:
    """``n`` for a file name: 1m, 20k, 500."""
    for size, suffix in ((1_000_000, "m"), (1_000, "k")):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def _commit_of(root: Path) -> str:
    """The commit checked out at ``root`` (``-dirty`` with changes), or ``unknown``."""
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.check_output(
            [*git, "rev-parse", "--short", "HEAD"], text=True, stderr=subprocess.DEVNULL
        )
        dirty = subprocess.check_output([*git, "status", "--porcelain", "--", "icesink"], text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.strip() + ("-dirty" if dirty.strip() else "")


def _relaunch(args: argparse.Namespace, argv: list[str]) -> int:
    """This benchmark in a new process with ``--pythonpath``'s icesink (see the module)."""
    code_root: Path = args.pythonpath
    if not (code_root / "icesink" / "__init__.py").exists():
        raise SystemExit(f"--pythonpath {code_root}: no icesink package there (give a checkout's root)")
    rest, skip = [], False
    for arg in argv:
        if skip or arg == "--pythonpath" or arg.startswith("--pythonpath="):
            skip = arg == "--pythonpath" and not skip
            continue
        rest.append(arg)
    # the resolved paths, as the new process runs in the other checkout
    rest += ["--results", str(args.results), "--workdir", str(args.workdir)]
    if args.compare:
        rest += ["--compare", *map(str, args.compare)]
    env = {**os.environ, "PYTHONPATH": f"{code_root}{os.pathsep}{REPO_ROOT}", CODE_ROOT_ENV: str(code_root)}
    env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    command = [sys.executable, "-c", _LAUNCHER, str(REPO_ROOT), *rest]
    return subprocess.call(command, cwd=code_root, env=env)  # workers start in the cwd: the other checkout


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = _arguments(raw)
    if args.plot:
        runs = [json.loads(p.read_text()) for p in args.plot]
        for run in runs:  # a run cut short has its batches so far, and no summary printed
            print(summary_text(run), end="\n\n")
        name = args.name or "upsert-long-" + "-vs-".join(
            p.stem.removeprefix("upsert-long-") for p in args.plot
        )
        print(f"plot: {plot(runs, args.results / f'{name}.png')}")
        return 0
    if args.pythonpath and os.environ.get(CODE_ROOT_ENV) != str(args.pythonpath):
        return _relaunch(args, raw)
    import icesink
    from benchmarks._upsert_stream import run_stream  # imports icesink: after the relaunch

    code_root = Path(icesink.__file__).resolve().parent.parent
    expected = os.environ.get(CODE_ROOT_ENV)
    if expected and code_root != Path(expected):
        raise SystemExit(f"the run imported the icesink of {code_root}, not of --pythonpath {expected}")
    commit = _commit_of(code_root)
    settings = f"maintenance {args.maintenance}" + "".join(f", {o}" for o in args.sink_option)
    label = args.label or f"{commit}, {settings}"
    sizes = f"{_count(args.keys)}-{args.batches}x{_count(args.changes)}"
    name = args.name or f"upsert-long-{commit}-{sizes}-maintenance-{args.maintenance}"
    load_start = os.getloadavg()
    started = time.perf_counter()
    workdir = args.workdir / name
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"{name}.json"

    def save(figures: dict[str, Any]) -> dict[str, Any]:
        result = {
            "label": label,
            "code": {"icesink": str(code_root), "commit": commit},
            "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "machine": _machine(load_start, os.getloadavg()),
            "elapsed_s": round(time.perf_counter() - started),
            **figures,
        }
        out.write_text(json.dumps(result, indent=1, default=str))
        return result

    shutil.rmtree(workdir, ignore_errors=True)
    try:
        result = save(run_stream(args, workdir, save))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    runs = [result, *(json.loads(c.read_text()) for c in args.compare)]
    png = plot(runs, args.results / f"{name}.png")
    print(summary_text(result))
    _log(f"results: {out}, plot: {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
