"""Runs of the ``icesink-kafka`` source into ``foreachBatch`` collectors, for tests with a real broker.

Every stream test checks the one property that matters for an exactly-once pipeline:
each (partition, offset) arrives once, none is missing, none is extra (:func:`assert_exactly`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.kafka_broker import KafkaBroker

QUERY_TIMEOUT_S = 60
Position = tuple[int, int]  # (partition, offset)


class Collector:
    """``foreachBatch`` target that keeps every micro-batch's rows on the driver.

    Args:
        fail_on_batch: A batch id whose first delivery raises (after collecting its rows),
            to simulate a crash between reading and committing.
    """

    def __init__(self, fail_on_batch: int | None = None) -> None:
        self.calls: list[tuple[int, list[Any]]] = []
        self.schema: Any = None
        self.fail_on_batch = fail_on_batch
        self.failed_rows: list[Any] = []

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        self.schema = batch_df.schema
        rows = batch_df.collect()
        if batch_id == self.fail_on_batch:
            self.fail_on_batch = None
            self.failed_rows = rows
            raise RuntimeError("injected failure")
        self.calls.append((batch_id, rows))

    def rows(self) -> list[Any]:
        return [row for _, rows in self.calls for row in rows]

    def positions(self) -> list[Position]:
        return [(row.partition, row.offset) for row in self.rows()]


def source_options(broker: KafkaBroker, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": broker.bootstrap_servers, **options}


def start_query(
    spark: Any, fmt: str, options: dict[str, str], checkpoint: Path, sink: Callable[..., None], **trigger: Any
) -> Any:
    stream = spark.readStream.format(fmt).options(**options).load()
    writer = stream.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    return (writer.trigger(**trigger) if trigger else writer).start()


def run_available_now(
    spark: Any, fmt: str, options: dict[str, str], checkpoint: Path, sink: Collector
) -> Any:
    """Run a ``trigger(availableNow=True)`` query to its end; raise its failure, if any."""
    query = start_query(spark, fmt, options, checkpoint, sink, availableNow=True)
    try:
        if not query.awaitTermination(QUERY_TIMEOUT_S):
            pytest.fail(f"the AvailableNow query did not finish within {QUERY_TIMEOUT_S}s")
    finally:
        query.stop()
    return query


def produce_spread(
    broker: KafkaBroker, topic: str, counts: dict[int, int], **kw: Any
) -> dict[Position, bytes]:
    """Produce ``counts[p]`` records to each partition ``p``; return value by position."""
    records = [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode()) for p, n in counts.items() for i in range(n)]
    delivered = broker.produce(topic, records, **kw)
    return {pos: value for pos, (_, _, value) in zip(delivered, records, strict=True)}


def assert_exactly(positions: list[Position], expected: set[Position] | dict[Position, Any]) -> None:
    duplicates = [p for p, n in Counter(positions).items() if n > 1]
    assert not duplicates, f"read more than once: {sorted(duplicates)[:10]}"
    assert set(positions) == set(expected), (
        f"missing {sorted(set(expected) - set(positions))[:10]}, "
        f"extra {sorted(set(positions) - set(expected))[:10]}"
    )
