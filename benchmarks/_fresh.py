"""``benchmarks.run --fresh-process``: every run of every contender in a new Python process.

The one-process mode of :mod:`benchmarks.run` warms everything up first (the JVM's JIT,
Spark's Python workers and what they import, the sink's once-per-application
self-checks), as a long-running stream is warm after its first minutes. A new job is
not: here each run is a process of its own, with its own SparkSession and no warm-up, as
a user starting a job sees it. Contenders take turns round-robin (round 1: every
contender, then round 2, ...) and each ratio is to the Parquet sink's run of the same
round. Each round also runs the one-process mode once (its warm-up, then one run per
contender, in a process of its own) so that fresh and warm figures come from the same
machine state.

Besides the usual figures of :mod:`benchmarks.run`, a fresh run reports its process's
start-up (Python with the benchmark's imports, then the SparkSession) and Spark's time
for each micro-batch (``durationMs`` of the query's progress), so that the first batch
can be compared with the steady ones; icesink runs also report each batch's step times
from the sink's metrics.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._contenders import CONTENDERS
from benchmarks._session import _jvm_pid, _log, _machine, _run_in_process, _session, _stream, session_of
from benchmarks._stream import Layout
from benchmarks._summary import REFERENCE, summarize


def shape_options(
    args: argparse.Namespace, row_groups: int | None = None, session: str | None = None
) -> list[str]:
    """The command-line options that give a child process the same input, Spark master and session.

    ``row_groups`` and ``session`` choose one of ``args.layouts`` (by default the first).
    """
    return [
        "--rows-per-batch", str(args.rows_per_batch), "--batches", str(args.batches),
        "--partition-values", str(args.partition_values), "--master", args.master,
        "--row-groups-per-file", str(row_groups or args.row_groups_per_file),
        "--session", session or args.session, "--workdir", str(args.workdir),
    ]  # fmt: skip


Runs = dict[tuple[int, str], list[dict[str, Any]]]


def run_fresh(args: argparse.Namespace) -> dict[str, Any]:
    """The parent: the inputs made once, then ``--repeats`` rounds of one process per contender run.

    Each round runs every layout (input row groups x session) of ``args.layouts`` in turn,
    every contender in each; with one layout the result is that layout's.
    """
    names = [n.strip() for n in args.contenders.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contenders {unknown}; choose from {list(CONTENDERS)}")
    if args.repeats < 1:
        raise SystemExit("--repeats must be at least 1")
    out_dir = args.workdir.resolve() / f"fresh-{os.getpid()}"
    out_dir.mkdir(parents=True)
    for row_groups in sorted({g for g, _ in args.layouts}):
        # The input is written by a process of its own, so that no measured run pays for it.
        prepare_command = [sys.executable, "-m", "benchmarks.run", *shape_options(args, row_groups)]
        subprocess.run([*prepare_command, "--fresh-prepare"], check=True)
    load_start = os.getloadavg()
    _log(f"fresh-process: {args.repeats} rounds of {names} in layouts {args.layouts}, load {load_start}")
    runs: Runs = {layout: [] for layout in args.layouts}
    warm_runs: Runs = {layout: [] for layout in args.layouts}
    for repeat in range(args.repeats):
        for layout in args.layouts:
            _fresh_round(args, names, layout, repeat, out_dir, runs[layout], warm_runs[layout])
    if not args.keep_outputs:
        shutil.rmtree(out_dir, ignore_errors=True)
    machine = _machine(load_start, os.getloadavg())
    results = [_layout_result(args, names, layout, runs, warm_runs, machine) for layout in args.layouts]
    if len(results) == 1:
        return results[0]
    return {"config": {"mode": "fresh-process", "layouts": True}, "machine": machine, "layouts": results}


def _fresh_round(
    args: argparse.Namespace,
    names: list[str],
    layout: tuple[int, str],
    repeat: int,
    out_dir: Path,
    runs: list[dict[str, Any]],
    warm_runs: list[dict[str, Any]],
) -> None:
    """One round of one layout: each contender in a fresh process, then the one-process mode once."""
    shape = shape_options(args, *layout)
    for name in names:
        runs.append(_fresh_run(args, shape, name, repeat, out_dir))
    if not args.fresh_no_warm:
        options = [*shape, "--repeats", "1", "--contenders", ",".join(names)]
        label = f"one-process round {repeat + 1}, {layout[0]} row group(s), {layout[1]} session"
        warm = _run_in_process(label, options, out_dir / f"warm-rg{layout[0]}-{layout[1]}-r{repeat}.json")
        warm_runs += [{**run, "repeat": repeat} for run in warm["runs"]]


def _layout_result(
    args: argparse.Namespace,
    names: list[str],
    layout: tuple[int, str],
    runs: Runs,
    warm_runs: Runs,
    machine: dict[str, Any],
) -> dict[str, Any]:
    result: dict[str, Any] = {
        "config": {
            "mode": "fresh-process",
            "rows_per_batch": args.rows_per_batch,
            "batches": args.batches,
            "rows": args.rows_per_batch * args.batches,
            "repeats": args.repeats,
            "master": args.master,
            "partition_values": args.partition_values,
            "partition_by": Layout(args.partition_values).partition_by,
            "row_groups_per_file": layout[0],
            "session": layout[1],
            "contenders": names,
        },
        "machine": machine,
        "summary": summarize(runs[layout], names),
        "runs": runs[layout],
    }
    if warm_runs[layout]:
        result["warm"] = {"summary": summarize(warm_runs[layout], names), "runs": warm_runs[layout]}
    return result


def _fresh_run(
    args: argparse.Namespace, shape: list[str], name: str, repeat: int, out_dir: Path
) -> dict[str, Any]:
    layout = f"rg{shape[shape.index('--row-groups-per-file') + 1]}-{shape[shape.index('--session') + 1]}"
    out = out_dir / f"{name}-{layout}-r{repeat}.json"
    command = [
        sys.executable, "-m", "benchmarks.run", *shape, "--fresh-child", name,
        "--fresh-repeat", str(repeat), "--fresh-spawned-at", repr(time.time()), "--out", str(out),
    ]  # fmt: skip
    if args.keep_outputs:
        command.append("--keep-outputs")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=sys.stderr)
    run: dict[str, Any] = json.loads(out.read_text())
    run["process"]["total_s"] = round(time.perf_counter() - started, 3)
    run["process"]["load_at_start"] = round(load, 2)
    _log(
        f"round {repeat + 1}/{args.repeats} {name} {layout} (fresh process): {run['seconds']:.1f} s, "
        f"{run['rows_per_s']:,} rows/s, process {run['process']['total_s']:.1f} s, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    return run


def run_child(args: argparse.Namespace) -> dict[str, Any]:
    """One run of one contender in this (new) process: no warm-up; its start-up timed too."""
    spawned_at: float = args.fresh_spawned_at
    process = {"imports_s": round(time.time() - spawned_at, 3)}
    spark = session_of(args.session, args.master)
    process["session_s"] = round(time.time() - spawned_at - process["imports_s"], 3)
    jvm_pid = _jvm_pid(spark)
    layout = Layout(args.partition_values)
    workdir: Path = args.workdir.resolve()
    stream = _stream(spark, workdir, args.batches, args.rows_per_batch, layout, args.row_groups_per_file)
    run_dir = workdir / f"fresh-run-{os.getpid()}"
    run_dir.mkdir(parents=True)
    result = CONTENDERS[args.fresh_child](stream, run_dir, jvm_pid)
    spark.stop()
    if not args.keep_outputs:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"repeat": args.fresh_repeat, **result.to_json(), "process": process}


def prepare(args: argparse.Namespace) -> None:
    """Write the input of this shape (kept by shape under ``--workdir``) and the warm-up's."""
    spark = _session(args.master)
    layout = Layout(args.partition_values)
    workdir: Path = args.workdir.resolve()
    _stream(spark, workdir, args.batches, args.rows_per_batch, layout, args.row_groups_per_file)
    spark.stop()


# --- Markdown ---------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _first_and_steady(runs: list[dict[str, Any]], key: str = "triggerExecution") -> tuple[float, float]:
    """Median over runs of the first batch's Spark time, and of the median of the later batches' (s)."""
    first = [r["trigger_ms"][0][key] / 1000 for r in runs if r["trigger_ms"]]
    steady = [_median([b[key] / 1000 for b in r["trigger_ms"][1:]]) for r in runs if len(r["trigger_ms"]) > 1]
    return _median(first), _median(steady)


def fresh_markdown(result: dict[str, Any]) -> str:
    """Fresh against one-process per contender, and the first micro-batch against the steady ones."""
    c, m = result["config"], result["machine"]
    warm = {s["contender"]: s for s in result.get("warm", {}).get("summary", [])}
    lines = [
        f"{c['batches']} micro-batches x {c['rows_per_batch']:,} rows, {c['partition_values']} partition "
        f"values, {c['master']}, {c.get('row_groups_per_file', 1)} row group(s) per input file, "
        f"{c.get('session', 'project')} session, median of {c['repeats']} rounds; load average "
        f"{m['load_average_start'][0]} at the start, {m['load_average_end'][0]} at the end",
        "",
        "| contender | fresh: median rows/s | x Parquet sink | one-process: median rows/s | x Parquet sink "
        "| first batch | later batches (median) | process start-up (imports / session) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in result["summary"]:
        name = s["contender"]
        mine = [r for r in result["runs"] if r["contender"] == name]
        first, steady = _first_and_steady(mine)
        w = warm.get(name)
        warm_rows = f"{w['median_rows_per_s']:,}" if w else "-"
        imports = _median([r["process"]["imports_s"] for r in mine])
        session = _median([r["process"]["session_s"] for r in mine])
        lines.append(
            f"| {name} | {s['median_rows_per_s']:,} | {_ratio(s)} "
            f"| {warm_rows} | {_ratio(w)} "
            f"| {first:.2f} s | {steady:.2f} s | {imports:.1f} / {session:.1f} s |"
        )
    lines += ["", *_step_lines(result)]
    return "\n".join(lines)


def layouts_markdown(result: dict[str, Any]) -> str:
    """Every layout's rows/s and ratio per contender, then each layout's own tables."""
    m = result["machine"]
    lines = [
        f"Layouts taking turns in every round; load average {m['load_average_start'][0]} at the start, "
        f"{m['load_average_end'][0]} at the end",
        "",
        "| row groups per file | session | contender | fresh: median rows/s | x Parquet sink (rounds) |",
        "|---|---|---|---|---|",
    ]
    for layout in result["layouts"]:
        c = layout["config"]
        for s in layout["summary"]:
            rounds = ", ".join(f"{x:.2f}" for x in s["ratios_to_parquet"])
            lines.append(
                f"| {c['row_groups_per_file']} | {c['session']} | {s['contender']} "
                f"| {s['median_rows_per_s']:,} | {_ratio(s)} ({rounds}) |"
            )
    for layout in result["layouts"]:
        lines += ["", fresh_markdown(layout)]
    return "\n".join(lines)


def _ratio(summary: dict[str, Any] | None) -> str:
    if summary is None or summary["ratio_to_parquet"] is None:
        return "-"
    return "1.00" if summary["contender"] == REFERENCE else f"{summary['ratio_to_parquet']:.2f}"


def _step_lines(result: dict[str, Any]) -> list[str]:
    """icesink's steps in the first batch against the later batches' median, fresh processes."""
    lines: list[str] = []
    for s in result["summary"]:
        mine = [r for r in result["runs"] if r["contender"] == s["contender"] and r["batch_step_seconds"]]
        if not mine:
            continue
        steps = list(mine[0]["batch_step_seconds"][0])
        if not lines:
            lines += [
                "icesink, first batch / later batches' median, per step (s), fresh processes:",
                "",
                "| contender | foreachBatch | " + " | ".join(steps) + " | Spark planning |",
                "|---|---|" + "---|" * (len(steps) + 1),
            ]
        cells = [_pair(mine, lambda r, i: r["batch_seconds"][i])]
        cells += [_pair(mine, lambda r, i, step=step: r["batch_step_seconds"][i][step]) for step in steps]
        cells.append(_pair(mine, lambda r, i: r["trigger_ms"][i].get("queryPlanning", 0) / 1000))
        lines.append(f"| {s['contender']} | " + " | ".join(cells) + " |")
    return lines


def _pair(runs: list[dict[str, Any]], value: Any) -> str:
    first = _median([value(r, 0) for r in runs])
    later = _median([_median([value(r, i) for i in range(1, len(r["batch_seconds"]))]) for r in runs])
    return f"{first:.2f} / {later:.2f}"
