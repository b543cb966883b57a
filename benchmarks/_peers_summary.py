"""The contenders of :mod:`benchmarks.peers` and the summary of their runs.

A contender is a writer on a runtime: ``icesink-bucket`` runs on the Spark of Iceberg's
runtime jar (:data:`DEFAULT_RUNTIME`), ``icesink-bucket@project`` on the project's own.
Every figure's ratio is to the reference (Spark's Parquet sink) on the same runtime in the
same round, so that writers on two Spark versions are each compared with Spark's own
writer on theirs.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

REFERENCE = "parquet"
ICESINK_WRITERS = ("icesink-bucket", "icesink-none")
ICEBERG_WRITERS = ("iceberg-none", "iceberg-hash", "iceberg-range")
WRITERS = (*ICESINK_WRITERS, *ICEBERG_WRITERS, REFERENCE)
RUNTIMES = ("iceberg", "project")
"""``iceberg``: the virtual environment of Iceberg's runtime (its Spark), the project's packages
appended after its own; ``project``: the project's virtual environment (its Spark)."""
DEFAULT_RUNTIME = "iceberg"


@dataclass(frozen=True)
class Contender:
    """One writer on one runtime."""

    writer: str
    runtime: str = DEFAULT_RUNTIME

    @property
    def name(self) -> str:
        return self.writer if self.runtime == DEFAULT_RUNTIME else f"{self.writer}@{self.runtime}"

    @property
    def reference(self) -> Contender:
        return Contender(REFERENCE, self.runtime)


def parse_contenders(text: str) -> list[Contender]:
    """The contenders of a comma-separated list, each runtime's reference added when missing.

    Raises:
        ValueError: an unknown writer or runtime, or Iceberg's sink on a runtime without its jar.
    """
    contenders: list[Contender] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        writer, _, runtime = item.partition("@")
        contender = Contender(writer, runtime or DEFAULT_RUNTIME)
        if writer not in WRITERS:
            raise ValueError(f"unknown writer {writer!r} in {item!r}; choose from {list(WRITERS)}")
        if contender.runtime not in RUNTIMES:
            raise ValueError(
                f"unknown runtime {contender.runtime!r} in {item!r}; choose from {list(RUNTIMES)}"
            )
        if writer in ICEBERG_WRITERS and contender.runtime != DEFAULT_RUNTIME:
            raise ValueError(
                f"{item!r}: Iceberg's sink runs only on its runtime's Spark ({DEFAULT_RUNTIME!r})"
            )
        if contender not in contenders:
            contenders.append(contender)
    for contender in list(contenders):
        if contender.reference not in contenders:
            contenders.append(contender.reference)
    return contenders


def round_order(contenders: Sequence[Contender], round_no: int) -> list[Contender]:
    """Round ``round_no`` (0-based) starts with the next contender: no one always runs first or last."""
    if not contenders:
        return []
    shift = round_no % len(contenders)
    return [*contenders[shift:], *contenders[:shift]]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _per_round(runs: list[dict[str, Any]], name: str) -> dict[int, dict[str, Any]]:
    return {r["round"]: r for r in runs if r["contender"] == name and r["ok"]}


def summarize(runs: list[dict[str, Any]], contenders: Sequence[Contender]) -> list[dict[str, Any]]:
    """Per contender: medians of its rounds, and of its per-round ratios to its runtime's reference.

    ``runs`` as :mod:`benchmarks.peers` writes them: ``contender``, ``round``, ``ok``, and when
    ``ok`` ``rows_per_s``, ``read_rows_per_s``, ``files`` (count, min, median, max bytes) and
    ``spark``; when not, ``error``. A ratio needs both runs of its round to have succeeded.
    """
    summary: list[dict[str, Any]] = []
    for contender in contenders:
        mine = _per_round(runs, contender.name)
        reference = _per_round(runs, contender.reference.name)
        paired = [(mine[n], reference[n]) for n in sorted(mine) if n in reference]
        failed = [r for r in runs if r["contender"] == contender.name and not r["ok"]]
        ok = list(mine.values())
        summary.append(
            {
                "contender": contender.name,
                "writer": contender.writer,
                "runtime": contender.runtime,
                "spark": sorted({r["spark"] for r in ok}),
                "rounds": len(ok),
                "failed": len(failed),
                "error": failed[0]["error"] if failed else None,
                "median_rows_per_s": _median([r["rows_per_s"] for r in ok]),
                "ratios": [round(m["rows_per_s"] / p["rows_per_s"], 3) for m, p in paired],
                "median_files": _median([r["files"]["count"] for r in ok]),
                "median_file_bytes": _median([r["files"]["median"] for r in ok]),
                "min_file_bytes": min((r["files"]["min"] for r in ok), default=None),
                "median_read_rows_per_s": _median([r["read_rows_per_s"] for r in ok]),
                "read_ratios": [round(m["read_rows_per_s"] / p["read_rows_per_s"], 3) for m, p in paired],
                "load": [r["load"] for r in ok],
            }
        )
    for s in summary:
        s["ratio"], s["read_ratio"] = _median(s["ratios"]), _median(s["read_ratios"])
    return summary


def goals(runs: list[dict[str, Any]], contenders: Sequence[Contender]) -> list[dict[str, Any]]:
    """Each icesink contender against each Iceberg one of its runtime: per-round rows/s ratios, files."""
    pairs = [
        (a, b)
        for a in contenders
        for b in contenders
        if a.writer in ICESINK_WRITERS and b.writer in ICEBERG_WRITERS and a.runtime == b.runtime
    ]
    found = []
    for ours, theirs in pairs:
        mine, peer = _per_round(runs, ours.name), _per_round(runs, theirs.name)
        rounds = [n for n in sorted(mine) if n in peer]
        if not rounds:
            continue
        ratios = [round(mine[n]["rows_per_s"] / peer[n]["rows_per_s"], 3) for n in rounds]
        found.append(
            {
                "icesink": ours.name,
                "iceberg": theirs.name,
                "ratios": ratios,
                "ratio": _median(ratios),
                "files": [mine[n]["files"]["count"] for n in rounds],
                "peer_files": [peer[n]["files"]["count"] for n in rounds],
            }
        )
    return found
