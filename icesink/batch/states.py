"""What a sink keeps per table and sink id, and the one place a crashed run's leftovers are settled.

A :class:`TableState` (staged batches, routing history, a lock) is made on the first batch of a
table and sink id in the process, and only once what a crashed run left is settled
(:meth:`TableStates._recover`, :mod:`icesink.commit.recovery`). A batch that fails on a table
may :meth:`TableStates.forget` it, so that the replay settles the failed attempt's files first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icesink.commit import ledger
from icesink.commit.recovery import AttemptLog
from icesink.commit.staging import StagingArea
from icesink.config import SinkConfig
from icesink.log_context import batch_logger
from icesink.metrics import SinkMetrics
from icesink.route.skew import RoutingHistory

__all__ = ["SinkParts", "TableState", "TableStates"]

logger = batch_logger(__name__)


@dataclass
class TableState:
    """What the sink keeps for one table and sink id: the streaming query that first wrote through it
    (``None``: unknown), its staged batches, the lock held while one of its batches is written or its
    staged batches committed, and what its last writes received (for the next shuffle's choice)."""

    name: str
    sink_id: str
    query_id: str | None
    staging: StagingArea
    lock: threading.RLock = field(default_factory=threading.RLock)
    routing: RoutingHistory = field(default_factory=RoutingHistory)


@dataclass
class _Slot:
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: TableState | None = None


class TableStates:
    """The states of a sink's tables, each recovered once."""

    def __init__(self, metrics: SinkMetrics) -> None:
        self._metrics = metrics
        self._lock = threading.Lock()
        self._slots: dict[tuple[str, str], _Slot] = {}

    def get(
        self, name: str, config: SinkConfig, table: Table, sink_id: str, query_id: str | None = None
    ) -> TableState:
        """The state of ``name`` for ``sink_id``; on first use, recovered from what a crashed run left."""
        with self._lock:
            slot = self._slots.setdefault((name, sink_id), _Slot())
        with slot.lock:  # recoveries of different tables run in parallel, of one table once
            if slot.state is None:
                state = TableState(name, sink_id, query_id, StagingArea.for_sink(config, table, sink_id))
                with state.lock:
                    self._recover(name, config, table, state)
                slot.state = state  # only once recovered: a failed recovery runs again
            return slot.state

    def _recover(self, name: str, config: SinkConfig, table: Table, state: TableState) -> None:
        """Staged batches the ledger has are forgotten (the crash came between commit and cleanup),
        the others reloaded, and the files of attempts neither committed nor staged deleted."""
        staged = state.staging.load()
        committed = [b for b in staged if ledger.is_committed(table, state.sink_id, b.batch_id)]
        state.staging.remove(committed)
        batches = state.staging.batches
        if batches:
            logger.info(
                "sink %s resumes %s staged batches (%s..%s) for %s",
                state.sink_id,
                len(batches),
                batches[0].batch_id,
                batches[-1].batch_id,
                name,
            )
        staged_attempts = frozenset(b.attempt for b in batches)
        report = AttemptLog.for_sink(config, table, state.sink_id).recover(table, staged_attempts)
        self._metrics.record_orphans(name, report.deleted_files, report.kept_files)

    def states(self, query_id: str | None = None) -> list[TableState]:
        """The states made so far (of one streaming query's sink ids, when given)."""
        with self._lock:
            slots = list(self._slots.values())
        return [
            s.state
            for s in slots
            if s.state is not None and (query_id is None or s.state.query_id == query_id)
        ]

    def forget(self, names: Iterable[str], sink_id: str) -> None:
        """The next batch on these tables settles what a failed attempt left first."""
        with self._lock:
            for name in names:
                self._slots.pop((name, sink_id), None)


@dataclass(frozen=True)
class SinkParts:
    """What every step of a sink's batches shares: its configuration, catalog, metrics and table states."""

    config: SinkConfig
    catalog: Catalog
    metrics: SinkMetrics
    states: TableStates
