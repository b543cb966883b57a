"""The modes of :mod:`benchmarks.run` that run it again, once per setting, in processes of their own.

``--scaling``: the matrix of :data:`SCALING`; ``--memory``: each contender alone.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks._session import _run_in_process

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
