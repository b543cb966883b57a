"""Same-run A/B of two commits: ``benchmarks.run`` of each, alternating, in processes of their own.

::

    .venv/bin/python -m benchmarks.compare_commits c567155 HEAD --rounds 3 \\
        --contenders icesink-bucket,icesink-none,parquet --batches 4

Each commit is checked out into a detached worktree under ``--workdir``; every round runs
``python -m benchmarks.run`` of the first commit, then of the second, each in a new
process of this environment's Python with the worktree first on ``PYTHONPATH`` (so each
runs its own ``sink`` and its own benchmark). The inputs are shared (``--workdir/inputs``).
The summary is, per contender and commit, the median rows/s and the median of the
per-round ratios to the Parquet sink (measured in the same process), and each round's
figures, so a difference can be told from the noise between rounds. With ``--rotate``
each round starts with the next contender.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

DEFAULT_WORKDIR = Path("/tmp/icesink-bench-ab")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    repo = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    commits = [_resolve(repo, c) for c in (args.base, args.head)]
    trees = [_worktree(repo, args.workdir, commit) for commit in commits]
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in commits}
    for round_no in range(1, args.rounds + 1):
        for commit, tree in zip(commits, trees, strict=True):
            out = args.workdir / f"{commit[:12]}-{round_no}.json"
            _run(tree, args, _contenders(args, round_no), out)
            results[commit].append(json.loads(out.read_text()))
    _print_summary(commits, results)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("base", help="the commit measured first in each round")
    p.add_argument("head", help="the commit measured second in each round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--contenders", default="icesink-bucket,icesink-none,parquet")
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--row-groups-per-file", type=int, default=1, help="as benchmarks.run's option")
    p.add_argument(
        "--rotate",
        action="store_true",
        help="round r starts with the r-th contender, so each is first in its process as often "
        "(the first contender of a process runs on the least warm JVM)",
    )
    p.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    return p


def _resolve(repo: Path, ref: str) -> str:
    return subprocess.check_output(["git", "-C", str(repo), "rev-parse", ref], text=True).strip()


def _worktree(repo: Path, workdir: Path, commit: str) -> Path:
    tree = workdir / commit[:12]
    if not tree.exists():
        add = ["git", "-C", str(repo), "worktree", "add", "-q", "--detach", str(tree), commit]
        subprocess.check_call(add)
    return tree


def _contenders(args: argparse.Namespace, round_no: int) -> str:
    """The contenders of a round, in the order they run."""
    names = args.contenders.split(",")
    first = (round_no - 1) % len(names) if args.rotate else 0
    return ",".join(names[first:] + names[:first])


def _run(tree: Path, args: argparse.Namespace, contenders: str, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYSPARK_PYTHON": sys.executable}
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    command = [
        sys.executable, "-m", "benchmarks.run", "--contenders", contenders,
        "--batches", str(args.batches), "--repeats", "1",
        "--row-groups-per-file", str(args.row_groups_per_file),
        "--workdir", str(args.workdir / "inputs"), "--out", str(out),
    ]  # fmt: skip
    print(f"{tree.name}: {' '.join(command[1:])}", flush=True)
    subprocess.check_call(command, cwd=tree, env=env, stdout=subprocess.DEVNULL)


def _print_summary(commits: list[str], results: dict[str, list[dict[str, Any]]]) -> None:
    print(
        "| contender | commit | median rows/s | median x Parquet sink "
        "| per round (x Parquet sink) | load at start |"
    )
    print("|---|---|---|---|---|---|")
    contenders = [s["contender"] for s in results[commits[0]][0]["summary"]]
    for contender in contenders:
        for commit in commits:
            rows = [_summary(r, contender) for r in results[commit]]
            rates = [int(s["median_rows_per_s"]) for s in rows]
            ratios = [float(s["ratio_to_parquet"]) for s in rows]
            loads = [f"{r['machine']['load_average_start'][0]:.1f}" for r in results[commit]]
            per_round = ", ".join(f"{x:.3f}" for x in ratios)
            print(
                f"| {contender} | {commit[:7]} | {statistics.median(rates):,.0f} | "
                f"{statistics.median(ratios):.3f} | {per_round} | {', '.join(loads)} |"
            )


def _summary(result: dict[str, Any], contender: str) -> dict[str, Any]:
    summary: dict[str, Any] = next(s for s in result["summary"] if s["contender"] == contender)
    return summary


if __name__ == "__main__":
    raise SystemExit(main())
