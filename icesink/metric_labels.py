"""The ``table`` label of the sink's metrics, bounded to a number of tables.

A sink routing one stream to many tables gives each table its own series; Prometheus
pays for every series, so :class:`TableLabelLimit` lets the first ``metrics.max-tables``
tables seen keep their name as the ``table`` label and records every further table
under ``table="_other"``, warning once. The metric families whose first label is
``table`` (all of them) are the ``Bounded*`` classes below: every ``labels()`` call,
wherever in the sink it is made, goes through the limit.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Self

from prometheus_client import Counter, Gauge, Histogram

logger = logging.getLogger(__name__)

#: The ``table`` label of the series of the tables past the limit.
OTHER_TABLES_LABEL = "_other"
#: Tables with series of their own unless ``metrics.max-tables`` says otherwise.
DEFAULT_MAX_TABLES = 1000


class TableLabelLimit:
    """The tables that have series of their own: the first ``max_tables`` seen.

    Args:
        max_tables: How many tables keep their name as the ``table`` label.
    """

    def __init__(self, max_tables: int = DEFAULT_MAX_TABLES) -> None:
        if max_tables < 1:
            raise ValueError(f"max_tables must be at least 1, got {max_tables}")
        self.max_tables = max_tables
        self._tables: set[str] = set()
        self._lock = threading.Lock()
        self._warned = False

    def label(self, table: str) -> str:
        """The ``table`` label to record ``table``'s series under."""
        with self._lock:
            if table in self._tables or table == OTHER_TABLES_LABEL:
                return table
            if len(self._tables) < self.max_tables:
                self._tables.add(table)
                return table
            warn, self._warned = not self._warned, True
        if warn:
            logger.warning(
                "metrics: more than %d tables (metrics.max-tables); the series of table %s and of "
                "every further table are recorded under table=%r; raise metrics.max-tables to give "
                "them series of their own",
                self.max_tables,
                table,
                OTHER_TABLES_LABEL,
            )
        return OTHER_TABLES_LABEL

    def tables(self) -> frozenset[str]:
        """The tables that have series of their own so far."""
        with self._lock:
            return frozenset(self._tables)


def _bounded(
    limit: TableLabelLimit | None, values: Sequence[Any], named: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if limit is None:
        return tuple(values), named
    if values:
        return (limit.label(str(values[0])), *values[1:]), named
    if "table" in named:
        return (), {**named, "table": limit.label(str(named["table"]))}
    return (), named


class BoundedCounter(Counter):
    """A counter whose ``table`` label (the first) goes through :attr:`table_limit`."""

    table_limit: TableLabelLimit | None = None

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Self:
        values, named = _bounded(self.table_limit, labelvalues, labelkwargs)
        return super().labels(*values, **named)


class BoundedGauge(Gauge):
    """A gauge whose ``table`` label (the first) goes through :attr:`table_limit`."""

    table_limit: TableLabelLimit | None = None

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Self:
        values, named = _bounded(self.table_limit, labelvalues, labelkwargs)
        return super().labels(*values, **named)


class BoundedHistogram(Histogram):
    """A histogram whose ``table`` label (the first) goes through :attr:`table_limit`."""

    table_limit: TableLabelLimit | None = None

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Self:
        values, named = _bounded(self.table_limit, labelvalues, labelkwargs)
        return super().labels(*values, **named)
