"""Two variants of the Kafka job, same broker and messages, new processes taking turns: B against A.

What a change to the job's start or to its micro-batches saves, as a same-run A/B: one
broker, one topic of ``--messages`` 1 KB JSON messages (as ``benchmarks/kafka_connect.py``),
then ``--rounds`` rounds in which variant A and variant B each run the job once in a new
process (the first of a round alternating), each into a table of its own. A variant is a
checkout (its ``icesink``: ``--a-checkout``/``--b-checkout``, this one by default; export
another commit with ``git archive <commit> | tar -x -C <folder>``) and Spark settings beside
the job's own (``--a-conf``/``--b-conf`` ``key=value``, repeatable: JVM flags go in
``spark.driver.extraJavaOptions``) and sink options beside the run's own (``--a-sink``/
``--b-sink`` ``key=value``: ``maintenance.enabled=false`` shows what the sink's compaction
costs). Each run is measured as in ``kafka_connect.py`` (:mod:`benchmarks._commit_windows`):
CPU seconds up to its first commit, over the whole run, its start-up CPU and its steady
state's messages per CPU second and per second. The medians per variant and the medians of
the rounds' B / A ratios follow, the last line as JSON::

    .venv/bin/python -m benchmarks.kafka_job_ab --messages 200000 --rounds 4 \\
        --b-conf spark.driver.extraJavaOptions=-XX:+UseSerialGC
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks._kafka_tables import catalog_of, check_rows, committed
from benchmarks.kafka_connect import REPO_ROOT, broker_with_messages, job_run

FIGURES = (
    "first_commit_cpu_seconds",
    "cpu_seconds",
    "startup_cpu_seconds",
    "steady_messages_per_cpu_s",
    "steady_messages_per_s",
    "messages_per_cpu_s",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default="local[2]", help="the job's Spark master")
    parser.add_argument("--job-batches", type=int, default=8, help="micro-batches (maxOffsetsPerTrigger)")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="the longest one run may take")
    for variant in ("a", "b"):
        parser.add_argument(f"--{variant}-checkout", type=Path, default=REPO_ROOT)
        parser.add_argument(f"--{variant}-conf", action="append", default=[], metavar="KEY=VALUE")
        parser.add_argument(f"--{variant}-sink", action="append", default=[], metavar="KEY=VALUE")
    return parser.parse_args(argv)


def _conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"a Spark setting or sink option is KEY=VALUE, not {pair!r}")
        conf[key] = value
    return conf


def rounds(root: Path, broker: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """``args.rounds`` rounds of A and B, the first alternating; each run checked and printed."""
    variants = {
        "a": (args.a_checkout, _conf(args.a_conf), _conf(args.a_sink)),
        "b": (args.b_checkout, _conf(args.b_conf), _conf(args.b_sink)),
    }
    results = []
    for number in range(args.rounds):
        for name in ("a", "b") if number % 2 == 0 else ("b", "a"):
            checkout, conf, sink = variants[name]
            load = os.getloadavg()[0]
            result = job_run(root, broker, f"{name}_{number}", args, checkout, conf, sink)
            check_rows(catalog_of(root), result["table"], args.messages)
            result.update(committed(catalog_of(root), result["table"]) or {})
            result.update(variant=name, round=number + 1, load_average=load)
            results.append(result)
            steady, startup = result["steady_messages_per_cpu_s"] or 0.0, result["startup_cpu_seconds"] or 0.0
            print(
                f"round {number + 1} ({name}): first commit {result['first_commit_cpu_seconds']:.1f} CPU s, "
                f"whole run {result['cpu_seconds']:.1f} CPU s, start-up {startup:.1f} "
                f"CPU s, steady {steady:,.0f} messages per CPU s; {result['data_files']} files of "
                f"{result['data_bytes'] / args.messages:,.0f} bytes a message; {result['cpu_by_process']} "
                f"JVM {result['jvm_cpu_by_thread']} (load average {load:.1f})",
                flush=True,
            )
    return results


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Each variant's medians and the medians of the rounds' B / A ratios."""
    summary: dict[str, Any] = {}
    for name in ("a", "b"):
        mine = [r for r in results if r["variant"] == name]
        summary[name] = {
            key: round(statistics.median(r[key] for r in mine if r[key] is not None), 2)
            for key in FIGURES
            if any(r[key] is not None for r in mine)
        }
    for key in FIGURES:
        ratios = []
        for number in sorted({r["round"] for r in results}):
            pair = {r["variant"]: r for r in results if r["round"] == number}
            if pair["a"][key] and pair["b"][key]:
                ratios.append(pair["b"][key] / pair["a"][key])
        if ratios:
            summary[f"b_over_a_{key}"] = {
                "median": round(statistics.median(ratios), 3),
                "rounds": [round(v, 3) for v in ratios],
            }
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with broker_with_messages("icesink-kafka-job-ab-", args.messages, args.partitions) as (root, broker):
        results = rounds(root, broker, args)
    summary = summarize(results)
    for key in FIGURES:
        ratio = summary.get(f"b_over_a_{key}")
        if ratio is not None:
            a, b = summary["a"].get(key), summary["b"].get(key)
            print(f"{key}: A {a}, B {b}; B / A {ratio['median']} (rounds {ratio['rounds']})")
    settings = {
        "a": [str(args.a_checkout), args.a_conf, args.a_sink],
        "b": [str(args.b_checkout), args.b_conf, args.b_sink],
    }
    report = {"benchmark": "kafka_job_ab", "messages": args.messages, "job_batches": args.job_batches}
    print(json.dumps({**report, "variants": settings, "summary": summary, "runs": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
