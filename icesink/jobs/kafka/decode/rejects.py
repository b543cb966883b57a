"""Values that could not be decoded go to the sink's dead-letter table, exactly once per batch.

They travel the dead-letter table's own exactly-once path
(:class:`~icesink.DeadLetterQueue`): written by the executors, committed with
the batch id in the dead-letter table's ledger. They are recorded under the sink id
``<sink id>.decode``, apart from the dead letters the sink itself finds while
converting rows (under ``<sink id>``), so a batch's two kinds of dead letters never
mistake each other for a replay.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from icesink import (
    BadRecordError,
    BadRecordPolicy,
    BatchKey,
    DeadLetterOutcome,
    DeadLetterQueue,
    ensure_namespace,
)
from icesink.sources import RowCounts

if TYPE_CHECKING:
    from icesink import IcebergSink

logger = logging.getLogger(__name__)

DECODE_SINK_ID_SUFFIX = ".decode"


class RejectedValues:
    """Delivers a batch's undecodable values to the dead-letter table of ``sink``.

    Args:
        sink: The sink whose dead-letter table, catalog, metrics and ``on-bad-record``
            policy are used.
    """

    def __init__(self, sink: IcebergSink) -> None:
        self._config = sink.config
        self._catalog = sink.catalog
        self._queue = DeadLetterQueue(sink.config, sink.catalog, sink.metrics)
        self._namespace_checked = False

    @property
    def table_name(self) -> str:
        """The dead-letter table."""
        return self._queue.table_name

    def deliver(self, dead_letters: DataFrame, rows: int, sink_id: str, batch_id: int) -> DeadLetterOutcome:
        """Commit ``rows`` dead letters of batch ``batch_id`` (nothing when already committed).

        Args:
            dead_letters: ``column``, ``reason``, ``value``, ``original_row`` rows.
            rows: How many rows ``dead_letters`` has (the delivery checks it).
            sink_id: The sink's id; the dead letters are recorded under ``<sink_id>.decode``.
            batch_id: The micro-batch.

        Raises:
            BadRecordError: ``on-bad-record=fail``: the first undecodable value, instead.
        """
        if self._config.dead_letter.on_bad_record is BadRecordPolicy.FAIL:
            first = dead_letters.limit(1).collect()[0]
            raise BadRecordError(
                f"{rows} Kafka values of batch {batch_id} cannot be decoded; the first: "
                f"{first['reason']} {first['original_row'][:300]}",
                hint=f"set on-bad-record=dlq to send them to the dead-letter table {self.table_name}",
                table=self._config.table,
                batch_id=batch_id,
            )
        self._ensure_namespace()
        counts = RowCounts(rows, rows)  # every row is a dead letter, counted by the decoder
        outcome = self._queue.deliver(
            lambda: dead_letters, BatchKey.new(f"{sink_id}{DECODE_SINK_ID_SUFFIX}", batch_id), 0, counts
        )
        if outcome.skipped_replay:
            logger.info("undecodable values of batch %s of sink %s already dead-lettered", batch_id, sink_id)
        return outcome

    def _ensure_namespace(self) -> None:
        """Create the dead-letter table's namespace: the first batch may be all undecodable."""
        if not self._namespace_checked:
            namespace = self.table_name.rsplit(".", 1)[0]
            ensure_namespace(self._catalog, namespace)
            self._namespace_checked = True
