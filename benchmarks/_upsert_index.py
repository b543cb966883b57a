"""The key index on and off in one run of :mod:`benchmarks.upsert` (``--key-index both``).

A second table gets the same load files and every batch, its lookups reading the data
files; each batch's lookup time is taken around ``UpsertApplier.plan_lookup`` (through
the index the lookup is done there; otherwise it is planned there and its tasks timed by
the benchmark's runner).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from pyiceberg.table import Table

from benchmarks import _upsert_changes as model
from icesink.config import CommitConfig
from icesink.config_upsert import DEFAULT_KEY_INDEX_CACHE_BYTES
from icesink.upsert.batch import UpsertApplier
from icesink.upsert.key_index_update import KeyIndexStore
from icesink.upsert.lookup import LookupSpec

SINK_ID = "bench"


def timed_plans(applier: UpsertApplier, seconds: list[float]) -> None:
    """Time the applier's lookups planned (and, through the key index, done) as they run."""
    plan = applier.plan_lookup

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return plan(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    applier.plan_lookup = timed  # type: ignore[method-assign]


def index_applier(table: Table, run: Any, index: bool, prefix: str = "upsert") -> UpsertApplier:
    store = KeyIndexStore(table.io, [model.KEY], ".".join(table.name()), DEFAULT_KEY_INDEX_CACHE_BYTES)
    return UpsertApplier(
        table,
        [model.KEY],
        SINK_ID,
        CommitConfig(),
        LookupSpec(".".join(table.name()), dict(table.io.properties), prefix),
        run,
        index=store if index else None,
    )


def key_index_summary(with_index: list[dict[str, Any]], without: list[dict[str, Any]]) -> str:
    """Medians of the first and last five counted batches, with the key index and without it."""
    counted = len(with_index) - 1

    def median(rows: list[dict[str, Any]], key: str, late: bool) -> float:
        part = rows[1:][-5:] if late else rows[1:][:5]
        return statistics.median(r[key] for r in part) if part else 0.0

    lines = [f"key index on/off, {counted} counted batches (median of the first and the last five):"]
    for name, rows in (("with the key index", with_index), ("without it", without)):
        lines.append(
            f"  {name}: early {median(rows, 'changes_per_s', False):,.0f} changes/s "
            f"(lookup {median(rows, 'lookup_s', False):.2f} s), "
            f"late {median(rows, 'changes_per_s', True):,.0f} changes/s "
            f"(lookup {median(rows, 'lookup_s', True):.2f} s)"
        )
    return "\n".join(lines)
