"""Streaming progress as metrics: query events from Spark fed to :class:`~icesink.metrics.SinkMetrics`.

Spark reports after every micro-batch how many rows came in, how fast they arrived
and were processed, how long the batch took and, for Kafka, which offsets the batch
ended at and which were the latest. :class:`ProgressMetrics` turns those
reports into ``icesink_input_rows_total``, ``icesink_input_rows_per_second``,
``icesink_processed_rows_per_second``, ``icesink_batch_duration_seconds`` and
``icesink_source_offsets_behind_latest``, labelled with the table and sink id the
query writes through (the sink binds each query id to them at its first batch).
Where the batch function counted the records itself
(:meth:`~icesink.metrics.SinkMetrics.count_source_records`, for a source that yields a few
rows per task of records decoded as they were read), the report takes that count.

The sink subscribes its metrics to the one listener of the session that started its query
(:mod:`icesink.query_events`, through :func:`watch_query`), once per session and metrics;
jobs may also call :func:`watch_progress` with the session that starts their queries. The
subscription lasts as long as the metrics do.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from icesink.metrics import SinkMetrics
from icesink.query_events import subscribe, unsubscribe
from icesink.spark_session import query_session

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_watched: weakref.WeakKeyDictionary[SinkMetrics, ProgressMetrics] = weakref.WeakKeyDictionary()
"""Each metrics' handler, alive as long as the metrics are (it holds them weakly)."""


class ProgressMetrics:
    """Records the progress of the queries bound to ``metrics`` (others are ignored).

    Args:
        metrics: Where to record, held weakly; queries are matched through
            :meth:`SinkMetrics.sink_of_query`.
    """

    def __init__(self, metrics: SinkMetrics) -> None:
        self._metrics = weakref.ref(metrics)

    @property
    def metrics(self) -> SinkMetrics | None:
        return self._metrics()

    def on_progress(self, event: Any) -> None:
        """Record one micro-batch's progress."""
        try:
            progress = event.progress
            metrics = self.metrics
            sink = None if metrics is None else metrics.sink_of_query(str(progress.id))
            if metrics is None or sink is None:
                return
            duration_ms = progress.batchDuration
            input_rows = int(progress.numInputRows or 0)
            scale = 1.0  # Spark's rates count the source's rows: scaled to the records they held
            records = metrics.source_records(str(progress.id), int(progress.batchId))
            if records is not None:
                scale, input_rows = (records / input_rows if input_rows else 0.0), records
            metrics.record_progress(
                sink,
                input_rows=input_rows,
                input_rows_per_second=_finite(progress.inputRowsPerSecond) * scale,
                processed_rows_per_second=_finite(progress.processedRowsPerSecond) * scale,
                batch_duration_s=duration_ms / 1000 if duration_ms is not None else None,
                offsets_behind_latest=offsets_behind_latest(
                    (s.endOffset, s.latestOffset) for s in progress.sources
                ),
            )
        except Exception:  # a listener error must not disturb the query
            logger.warning("progress of a streaming query could not be recorded", exc_info=True)

    def on_idle(self, query_id: str) -> None:
        """Nothing arrives (the source answered): the rates drop to zero."""
        self._idle(query_id, source_answered=True)

    def on_terminated(self, query_id: str) -> None:
        """The query stopped: the rates drop to zero."""
        self._idle(query_id, source_answered=False)

    def _idle(self, query_id: str, *, source_answered: bool) -> None:
        try:
            metrics = self.metrics
            sink = None if metrics is None else metrics.sink_of_query(query_id)
            if metrics is not None and sink is not None:
                metrics.record_idle(sink, source_answered=source_answered)
        except Exception:
            logger.warning("idle streaming query could not be recorded", exc_info=True)


def offsets_behind_latest(offsets: Iterable[tuple[Any, Any]]) -> int | None:
    """Offsets between each source's end and latest offsets, summed over Kafka partitions.

    Args:
        offsets: ``(endOffset, latestOffset)`` per source, as JSON text or parsed, in the
            Kafka shape ``{"topic": {"0": 42}}``.

    Returns:
        The sum, or ``None`` when no source reports Kafka-shaped offsets.
    """
    total: int | None = None
    for end, latest in offsets:
        behind = _kafka_lag(_parse(end), _parse(latest))
        if behind is not None:
            total = (total or 0) + behind
    return total


def _parse(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _kafka_lag(end: Any, latest: Any) -> int | None:
    if not (_is_kafka_offsets(end) and _is_kafka_offsets(latest)):
        return None
    behind = 0
    for topic, partitions in latest.items():
        ends = end.get(topic, {})
        for partition, offset in partitions.items():
            if partition in ends and offset >= 0 and ends[partition] >= 0:
                # Tansu may report a latest offset below the true end: never negative
                behind += max(int(offset) - int(ends[partition]), 0)
    return behind


def _is_kafka_offsets(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(
            isinstance(p, Mapping) and all(isinstance(o, int) and not isinstance(o, bool) for o in p.values())
            for p in value.values()
        )
    )


def _finite(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def watch_progress(spark: SparkSession, metrics: SinkMetrics) -> ProgressMetrics:
    """Record the progress of ``spark``'s queries bound to ``metrics`` (idempotent).

    Args:
        spark: The session that starts the streaming queries.
        metrics: The sink's metrics.
    """
    with _lock:
        handler = _watched.get(metrics)
        if handler is None:
            handler = _watched[metrics] = ProgressMetrics(metrics)
    subscribe(spark, handler)
    return handler


def watch_query(batch_df: DataFrame, metrics: SinkMetrics) -> ProgressMetrics | None:
    """:func:`watch_progress` on the session that started ``batch_df``'s streaming query, if any.

    ``None`` outside a streaming query and under Spark Connect (a listener there would count
    in another process).
    """
    spark = query_session(batch_df)
    return None if spark is None else watch_progress(spark, metrics)


def unwatch_progress(spark: SparkSession, metrics: SinkMetrics) -> None:
    """Stop recording ``spark``'s progress into ``metrics`` (no-op when it was not)."""
    with _lock:
        handler = _watched.get(metrics)
    if handler is not None:
        unsubscribe(spark, handler)
