"""The sink deployed: S3 and a REST catalog against the local warehouse, a cluster against ``local[2]``.

Everything runs on loopback, started and stopped by this script with the launchers of
``icesink/jobs/local_servers``: SeaweedFS (an S3 API, with its Prometheus metrics on,
and an Iceberg REST catalog whose tables live in a table bucket), and for the second part
a Spark standalone cluster (a Master and two Workers of one core each). The input is the
reference workload (:mod:`icesink.jobs.taxi_workload`) as ``--batches`` Parquet files of
``--rows-per-batch`` rows, read one file per micro-batch with ``trigger(availableNow=True)``,
exactly as ``benchmarks.run`` does; every run writes it into a new table through
``IcebergSink`` (``distribution-mode=bucket``, 64 partition values, default options) and
checks that the table holds exactly the rows read.

Part ``storage`` (this process, ``local[2]``): ``local`` (SQLite catalog, warehouse folder
on the local disk, ``benchmarks.run``'s ``icesink-bucket``) against ``s3-rest`` (SeaweedFS's
REST catalog, tables on S3, the sink's ``state-location`` in the plain bucket), one run of
each per round, the order flipped every round, one warm-up run of each first.

Part ``cluster`` (a driver process per run, as a Spark application cannot change its
master): ``local[2]`` against ``spark://`` with the two Workers, both onto ``s3-rest``; the
executors share no disk with the driver but the input folder (same machine), so the
table's files, the metadata and the sink's state all go through S3. Each driver makes a
warm-up run on a small input, then the measured run.

Reported per contender (medians over rounds): rows/s (rows over the wall time from
``start()`` to the end of ``awaitTermination()``), the ratio to the other contender of
the same round, ``foreachBatch`` and commit p50/p95 over all batches of all rounds (the
commit time is the sink's own commit step), S3 requests per batch (SeaweedFS's
``SeaweedFS_s3_request_total`` counters diffed around each ``foreachBatch`` call: the
executors' writes and the driver's reads, writes and state records, per bucket and
request type) and REST catalog requests per batch (counted on the driver's catalog
session), and the data files of the last run. Run with::

    .venv/bin/python -m benchmarks.deploy --rounds 3 --out deploy.json
    .venv/bin/python -m benchmarks.deploy --batches 3 --rows-per-batch 100000 --rounds 1   # quick
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

from benchmarks._deploy_report import markdown, summarize
from benchmarks._deploy_runs import WARM_UP_BATCHES, WARM_UP_ROWS, Target, run_target, target_json
from benchmarks._session import _jvm_pid, _log, _machine, _session, _stream
from benchmarks._stream import Layout
from icesink.jobs.local_servers.processes import die_with_parent
from icesink.jobs.local_servers.seaweedfs import WAREHOUSE_BUCKET, SeaweedFS
from icesink.jobs.local_servers.spark_cluster import SparkCluster
from icesink.jobs.local_servers.spark_home import spark_environment

REPO = Path(__file__).resolve().parents[1]
DEFAULT_WORKDIR = Path(tempfile.gettempdir()) / "icesink-bench"
PARTS = ("storage", "cluster")
LOCAL_MASTER = "local[2]"
DRIVER_TIMEOUT_S = 3600.0


def s3_rest(server: SeaweedFS) -> Target:
    """SeaweedFS's REST catalog, tables in its table bucket, the sink's state in the plain bucket."""
    return Target(
        "s3-rest",
        rest=server.rest_catalog_properties(),
        state_root=f"s3://{WAREHOUSE_BUCKET}/icesink-bench-state",
        metrics_url=server.metrics_url,
    )


def _order(names: list[str], round_: int) -> list[str]:
    return names if round_ % 2 == 0 else names[::-1]


def run_storage(args: argparse.Namespace, server: SeaweedFS, root: Path) -> list[dict[str, Any]]:
    """Part ``storage``: local warehouse against S3 + REST, in this process, alternating."""
    targets = {"local": Target("local"), "s3-rest": s3_rest(server)}
    spark = _session(LOCAL_MASTER)
    try:
        jvm_pid = _jvm_pid(spark)
        layout = Layout(64)
        stream = _stream(spark, args.workdir, args.batches, args.rows_per_batch, layout)
        warm_up = _stream(spark, args.workdir, WARM_UP_BATCHES, WARM_UP_ROWS, layout)
        for name, target in targets.items():  # JIT, Python workers' imports, the sink's self-checks
            run_dir = root / f"warm-up-{name}"
            run_dir.mkdir(parents=True)
            run_target(target, warm_up, run_dir, jvm_pid, f"warm_{os.getpid()}", LOCAL_MASTER)
        runs = []
        for round_ in range(args.rounds):
            for name in _order(list(targets), round_):
                run_dir = root / f"storage-{name}-r{round_}"
                run_dir.mkdir(parents=True)
                namespace = "bench" if name == "local" else f"bench_{os.getpid()}_r{round_}"
                run = run_target(targets[name], stream, run_dir, jvm_pid, namespace, LOCAL_MASTER)
                runs.append({**run.to_json(), "part": "storage", "round": round_, "contender": name})
                _log(f"storage round {round_ + 1}/{args.rounds} {name}: {_brief(runs[-1])}")
                if not args.keep_outputs:
                    shutil.rmtree(run_dir, ignore_errors=True)
        return runs
    finally:
        spark.stop()


def run_cluster(args: argparse.Namespace, server: SeaweedFS, root: Path) -> list[dict[str, Any]]:
    """Part ``cluster``: ``local[2]`` against two 1-core Workers onto S3 + REST, a driver process per run."""
    input_folder = args.workdir / f"input-{args.batches}x{args.rows_per_batch}"
    warm_up_folder = args.workdir / f"input-{WARM_UP_BATCHES}x{WARM_UP_ROWS}"
    if "storage" not in args.parts:  # the inputs are made by part storage otherwise
        spark = _session(LOCAL_MASTER)
        _stream(spark, args.workdir, args.batches, args.rows_per_batch, Layout(64))
        _stream(spark, args.workdir, WARM_UP_BATCHES, WARM_UP_ROWS, Layout(64))
        spark.stop()
    runs = []
    with SparkCluster(root / "spark-cluster", workers=2) as cluster:
        masters = {LOCAL_MASTER: LOCAL_MASTER, "cluster-2x1": cluster.master_url}
        for round_ in range(args.rounds):
            for name in _order(list(masters), round_):
                run_dir = root / f"cluster-{name}-r{round_}"
                run_dir.mkdir(parents=True)
                arguments = {
                    "master": masters[name],
                    "cluster": name != LOCAL_MASTER,
                    "input": str(input_folder),
                    "warm_up_input": str(warm_up_folder),
                    "batches": args.batches,
                    "rows_per_batch": args.rows_per_batch,
                    "target": target_json(s3_rest(server)),
                    "run_dir": str(run_dir),
                    "namespace": f"bench_{os.getpid()}_{''.join(c for c in name if c.isalnum())}_r{round_}",
                }
                result = _driver(arguments, run_dir)
                runs.append({**result, "part": "cluster", "round": round_, "contender": name})
                _log(f"cluster round {round_ + 1}/{args.rounds} {name}: {_brief(runs[-1])}")
                if not args.keep_outputs:
                    shutil.rmtree(run_dir, ignore_errors=True)
    return runs


def _driver(arguments: dict[str, Any], run_dir: Path, module: str = "benchmarks.deploy") -> dict[str, Any]:
    """``python -m <module> --driver``, ``arguments`` on stdin (no credential on a command line)."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, "--driver"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=(run_dir / "driver.log").open("w"),
        text=True,
        env=spark_environment(run_dir / "driver"),
        cwd=REPO,  # benchmarks is not an installed package
        preexec_fn=die_with_parent,  # noqa: PLW1509 (only a prctl call)
    )
    stdout, _ = process.communicate(json.dumps(arguments), timeout=DRIVER_TIMEOUT_S)
    if process.returncode != 0:
        tail = (run_dir / "driver.log").read_text(errors="replace")[-4000:]
        raise RuntimeError(f"the driver on {arguments['master']} exited with {process.returncode}:\n{tail}")
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


def _brief(run: dict[str, Any]) -> str:
    return f"{run['seconds']:.1f} s, {run['rows_per_s']:,} rows/s, load {os.getloadavg()[0]:.1f}"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start SeaweedFS, run the parts asked for, stop everything; the results."""
    args.workdir = args.workdir.resolve()
    root = args.workdir / f"deploy-{os.getpid()}"
    root.mkdir(parents=True)
    load_start = os.getloadavg()
    os.environ.update(spark_environment(root / "driver"))  # this process's Spark on loopback too
    server = SeaweedFS(root / "seaweedfs")
    (root / "seaweedfs").mkdir()
    parts: dict[str, Any] = {}
    try:
        server.start()
        _log(f"SeaweedFS up: S3 {server.s3_endpoint}, REST {server.catalog_uri}; load {load_start}")
        for part in args.parts:
            part_load = os.getloadavg()
            runs = (run_storage if part == "storage" else run_cluster)(args, server, root)
            parts[part] = {"load_average_start": list(part_load), "load_average_end": list(os.getloadavg())}
            parts[part]["runs"] = runs
    finally:
        server.stop()
        if not args.keep_outputs:
            shutil.rmtree(root, ignore_errors=True)
    result = {
        "config": {
            "batches": args.batches,
            "rows_per_batch": args.rows_per_batch,
            "rows": args.batches * args.rows_per_batch,
            "rounds": args.rounds,
            "parts": args.parts,
            "partition_by": Layout(64).partition_by,
        },
        "machine": _machine(load_start, os.getloadavg()),
        "parts": parts,
    }
    result["summary"] = summarize(result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=10, help="micro-batches (one input file each)")
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {PARTS}")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="inputs are kept here by shape")
    parser.add_argument("--keep-outputs", action="store_true", help="keep the runs' folders and the S3 data")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--render", type=Path, help="print the tables of an earlier --out file and exit")
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)  # one run, JSON on stdin
    args = parser.parse_args(argv)
    if args.driver:
        from benchmarks._deploy_runs import main_json

        print(main_json(sys.stdin.read()), flush=True)
        return 0
    if args.render:
        earlier = json.loads(args.render.read_text())
        earlier["summary"] = summarize(earlier)
        print(markdown(earlier))
        return 0
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if unknown := [p for p in args.parts if p not in PARTS]:
        raise SystemExit(f"unknown parts {unknown}; choose from {list(PARTS)}")
    started = time.perf_counter()
    result = run(args)
    result["elapsed_s"] = round(time.perf_counter() - started)
    if args.out:  # first: the tables can be printed again from it (--render)
        args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
