"""The upsert benchmarks' sink as a user runs it, and what each of its batches did, read from its metrics.

:func:`sink_options` are the public options of a sink upserting the benchmark's table
(:mod:`benchmarks._upsert_changes`) in a SQLite catalog under a folder. :class:`BatchProbe`
reads what one ``sink(batch_df, batch_id)`` call did from the sink's own metrics (the seconds
of each step in ``icesink_step_duration_seconds``, the lookup's among them, its maintenance's
time and files, its delete files). Code from before the sink timed its lookup as a step is
timed by wrapping the function its row delta commit kinds call (:data:`LOOKUP_ENTRY_POINTS`);
code that has neither reports no lookup time (``None``).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks import _upsert_changes as model

TABLE = "bench.items"
#: The sink's timed steps of a batch (``icesink_step_duration_seconds``), each reported.
STEPS = ("changes", "schema", "normalize", "route", "write", "keys", "lookup", "commit")
#: (module, function) pairs whose calls are a batch's lookup; each found is timed.
LOOKUP_ENTRY_POINTS = (
    ("icesink.batch.row_deltas", "run_table_lookups"),
    ("icesink.batch.staged_row_deltas", "run_table_lookups"),
)


def sink_options(workdir: Path, buckets: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A sink upserting :data:`TABLE` (``bucket(buckets, id)``) in a SQLite catalog under ``workdir``."""
    return {
        "catalog.name": "bench",
        "catalog.type": "sql",
        "catalog.uri": f"sqlite:///{workdir / 'catalog.db'}",
        "catalog.warehouse": f"file://{workdir / 'warehouse'}",
        "table": TABLE,
        "partition-by": f"bucket({buckets}, {model.KEY})",
        "write.mode": "upsert",
        "upsert.key-columns": model.KEY,
        "sink-id": "bench",
        **(extra or {}),
    }


def _sum(registry: CollectorRegistry, sample: str, **labels: str) -> float:
    """The sum of the samples named ``sample`` whose labels include ``labels`` (0 when none)."""
    total = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


class BatchProbe:
    """What each batch of a sink did: :meth:`batch` around one call (see the module).

    Args:
        registry: The sink's metrics registry (``sink.metrics.registry``).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._lookup_s = 0.0
        self.lookup_timed = self._wrap_lookups()

    def _wrap_lookups(self) -> bool:
        found = False
        for module_name, name in LOOKUP_ENTRY_POINTS:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            function = getattr(module, name, None)
            if function is not None:
                setattr(module, name, self._timed(function))
                found = True
        return found

    def _timed(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._lookup_s += time.perf_counter() - started

        return timed

    def _counters(self) -> dict[str, float]:
        r = self._registry
        steps = {f"{step}_s": _sum(r, "icesink_step_duration_seconds_sum", step=step) for step in STEPS}
        return {
            **steps,
            "maintenance_s": _sum(r, "icesink_maintenance_duration_seconds_sum"),
            "delete_files_added": _sum(r, "icesink_delete_files_total"),
            "compacted_data_files": _sum(r, "icesink_maintenance_files_total", action="rewritten"),
            "compacted_delete_files": _sum(r, "icesink_maintenance_files_total", action="delete_removed"),
            "wrapped_lookup_s": self._lookup_s,
        }

    @contextmanager
    def batch(self) -> Iterator[dict[str, Any]]:
        """Around one batch: yields a dict that holds, after the block, what the batch did."""
        before = self._counters()
        figures: dict[str, Any] = {}
        started = time.perf_counter()
        yield figures
        figures["seconds"] = time.perf_counter() - started
        after = self._counters()
        figures.update({k: after[k] - before[k] for k in after})
        for count in ("delete_files_added", "compacted_data_files", "compacted_delete_files"):
            figures[count] = int(figures[count])
        wrapped = figures.pop("wrapped_lookup_s")
        if not figures["lookup_s"]:  # the sink's code did not time its lookup as a step
            figures["lookup_s"] = wrapped if self.lookup_timed else None


def table_files(summary: Mapping[str, str] | None) -> dict[str, int]:
    """Live data files and delete files of a table, from its current snapshot's summary."""
    summary = summary or {}
    return {
        "data_files": int(summary.get("total-data-files") or 0),
        "delete_files": int(summary.get("total-delete-files") or 0),
    }
