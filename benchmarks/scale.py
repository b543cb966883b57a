"""How the cost of one micro-batch grows: rows, partition values, tables, snapshots kept, executors.

Each axis varies one parameter of a base point (``--base-rows`` rows of the reference
workload per batch, ``--base-partitions`` partition values, one table, a new table,
``local[2]``) and measures every point the same way (:mod:`benchmarks._scale_points`): a
fresh sink and table, ``--warm-up`` batches not counted, then ``--batches`` batches, each
measured for its wall time, the sink's step timings, the Spark jobs it ran (their span and
summed task time, from Spark's status store) and the driver's CPU time; a point is the
median batch. The driver's share is the batch's time outside Spark jobs, split into the
sink's commit step and the rest (planning: normalize, route, the write's setup, collecting
the files). Axes:

* ``rows``: rows per batch (``--rows-points``);
* ``partitions``: partition values, ``day x bucket(N)`` (``--partition-points``, multiples of 4);
* ``tables``: tables each batch is routed to (``route.by=field``, ``--table-points``);
* ``tasks``: tasks that read each batch (the bucket shuffle's map tasks; ``--task-points``);
* ``snapshots``: snapshots the table keeps before the first batch, one synthetic data
  file each (``--snapshot-points``; made by :func:`benchmarks._synthetic_files.fill_history`);
* ``executors``: a driver process per point (``--executor-points``): ``local`` is
  ``local[2]``, a number N a Spark standalone cluster of N one-core Workers started for
  that point (``icesink/jobs/local_servers``), the warehouse on the local disk.

Then slopes through each axis's points (:mod:`benchmarks._scale_report`). Run with::

    .venv/bin/python -m benchmarks.scale --axes rows,partitions,tables,snapshots,executors --out scale.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._scale_points import Point, input_folder, measure, warm_up_session
from benchmarks._scale_report import markdown
from benchmarks._session import _jvm_pid, _log, _machine, _session
from benchmarks.deploy import _driver
from icesink.jobs.local_servers.spark_cluster import SparkCluster
from icesink.jobs.local_servers.spark_home import spark_environment

AXES = ("rows", "partitions", "tables", "tasks", "snapshots", "executors")
LOCAL = "local"
LOCAL_MASTER = "local[2]"
MODULE = "benchmarks.scale"  # this module's name also when run as __main__
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench"


def _numbers(text: str) -> list[int]:
    return [int(n) for n in text.split(",") if n.strip()]


def in_process_points(args: argparse.Namespace) -> list[Point]:
    """The points of every axis asked for but ``executors``, in the order run."""
    base: dict[str, Any] = {
        "rows": args.base_rows,
        "partition_values": args.base_partitions,
        "warm_up": args.warm_up,
        "batches": args.batches,
    }
    varied = {
        "rows": ("rows", _numbers(args.rows_points)),
        "partitions": ("partition_values", _numbers(args.partition_points)),
        "tables": ("tables", _numbers(args.table_points)),
        "tasks": ("input_tasks", _numbers(args.task_points)),
        "snapshots": ("snapshots", _numbers(args.snapshot_points)),
    }
    points = []
    for axis in args.axes:
        if axis in varied:
            field, values = varied[axis]
            points += [Point(axis, f"{v:,}", **{**base, field: v}) for v in values]
    return points


def run_in_process(args: argparse.Namespace, points: list[Point], root: Path) -> list[dict[str, Any]]:
    """``points`` measured one after the other in this process's ``local[2]`` session."""
    spark = _session(LOCAL_MASTER)
    results = []
    try:
        jvm_pid = _jvm_pid(spark)
        folder = input_folder(spark, args.workdir, points[0])
        warm_up_session(spark, points[0], folder, root / "warm-up", jvm_pid)
        for index, point in enumerate(points):
            folder = input_folder(spark, args.workdir, point)
            result = measure(spark, point, folder, root / f"point-{index}", jvm_pid)
            results.append(result)
            _log(f"{point.axis} {point.label}: {_brief(result)}")
            _save(args, results)
            if not args.keep_outputs:
                shutil.rmtree(root / f"point-{index}", ignore_errors=True)
    finally:
        spark.stop()
    return results


def run_executors(args: argparse.Namespace, root: Path, done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The base point in a driver process per ``--executor-points`` entry (a cluster started for each)."""
    results = []
    for entry in (e.strip() for e in args.executor_points.split(",") if e.strip()):
        label = LOCAL_MASTER if entry == LOCAL else f"{entry} worker{'s' if entry != '1' else ''}"
        run_dir = root / f"executors-{entry}"
        run_dir.mkdir(parents=True)
        point = {
            "axis": "executors",
            "label": label,
            "rows": args.base_rows,
            "partition_values": args.base_partitions,
            "warm_up": args.warm_up,
            "batches": args.batches,
        }
        arguments = {"workdir": str(args.workdir), "run_dir": str(run_dir / "run"), "cluster": entry != LOCAL}
        if entry == LOCAL:
            arguments |= {"master": LOCAL_MASTER, "point": {**point, "master": LOCAL_MASTER}}
            result = _driver(arguments, run_dir, MODULE)
        else:
            with SparkCluster(run_dir / "spark-cluster", workers=int(entry)) as cluster:
                arguments |= {"master": cluster.master_url, "point": {**point, "master": cluster.master_url}}
                result = _driver(arguments, run_dir, MODULE)
        results.append(result)
        _log(f"executors {label}: {_brief(result)}")
        _save(args, done + results)
        if not args.keep_outputs:
            shutil.rmtree(run_dir, ignore_errors=True)
    return results


def _brief(result: dict[str, Any]) -> str:
    m = result["median"]
    return (
        f"wall {m['wall_s']:.2f} s, commit {m.get('step_commit', 0.0):.3f} s, "
        f"planning {m['planning_s']:.3f} s, jobs {m['job_span_s']:.2f} s, {m['files']:.0f} files; "
        f"load {os.getloadavg()[0]:.1f}"
    )


def _save(args: argparse.Namespace, points: list[dict[str, Any]]) -> None:
    """Write what is measured so far (an interrupted sweep keeps its points)."""
    if args.out:
        args.out.write_text(
            json.dumps({"config": vars(args) | {"out": str(args.out)}, "points": points}, default=str)
        )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every axis asked for; the points in the order run."""
    args.workdir = args.workdir.resolve()
    root = args.workdir / f"scale-{os.getpid()}"
    root.mkdir(parents=True)
    os.environ.update(spark_environment(root / "driver"))  # this process's Spark on loopback too
    load_start = os.getloadavg()
    try:
        points = in_process_points(args)
        results = run_in_process(args, points, root) if points else []
        if "executors" in args.axes:
            results += run_executors(args, root, results)
    finally:
        if not args.keep_outputs:
            shutil.rmtree(root, ignore_errors=True)
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": _machine(load_start, os.getloadavg()),
        "points": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--axes", default=",".join(AXES), help=f"comma-separated, of {AXES}")
    parser.add_argument("--base-rows", type=int, default=200_000)
    parser.add_argument("--base-partitions", type=int, default=64)
    parser.add_argument("--rows-points", default="100000,200000,400000,800000")
    parser.add_argument("--partition-points", default="64,256,1024")
    parser.add_argument("--table-points", default="1,4,16")
    parser.add_argument("--task-points", default="2,8,32")
    parser.add_argument("--snapshot-points", default="0,500,2000")
    parser.add_argument("--executor-points", default="local,1,2", help="local ([2]) or a number of Workers")
    parser.add_argument("--warm-up", type=int, default=1, help="batches per point not counted")
    parser.add_argument("--batches", type=int, default=3, help="batches measured per point")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="inputs are kept here by shape")
    parser.add_argument("--keep-outputs", action="store_true", help="keep each point's tables")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--render", type=Path, help="print the tables of an earlier --out file and exit")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)  # one point, JSON on stdin
    args = parser.parse_args(argv)
    if args.driver:
        from benchmarks._scale_points import driver_main

        print(json.dumps(driver_main(json.loads(sys.stdin.read()))), flush=True)
        return 0
    if args.render:
        print(markdown(json.loads(args.render.read_text())))
        return 0
    args.axes = [a.strip() for a in args.axes.split(",") if a.strip()]
    if unknown := [a for a in args.axes if a not in AXES]:
        raise SystemExit(f"unknown axes {unknown}; choose from {list(AXES)}")
    started = time.perf_counter()
    result = run(args)
    result["elapsed_s"] = round(time.perf_counter() - started)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
