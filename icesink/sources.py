"""What a source that makes its rows in Python needs from the sink: the public face for sources.

A source that makes a micro-batch's rows in Python (the Kafka job decodes values in its own
``mapInArrow`` tasks) can hand the sink the function that made them, so the write tasks
make the rows themselves, or write the rows to the table in its own tasks, planned and
committed by the sink. The names, each with its reason:

Handing the batch to the sink (driver):

- :class:`ArrowSource`: how the batch was made (``df.mapInArrow(function, ...)``), the third
  argument of ``IcebergSink.__call__``, so that the write tasks can run ``function``
  themselves when the batch needs nothing from Spark.
- :class:`SourceWrite`: the sink's plan of a write by the source's own tasks
  (``IcebergSink.source_write(batch_df, batch_id)``), handed back in ``ArrowSource.written``.

Writing in the source's tasks (executors):

- :func:`plan_in_task`: the plan a task finds in its Spark job's properties, or ``None``.
- :class:`SourceWritePlan`: that plan, picklable.
- :class:`SourceTaskWriter`: one task's writer of a plan: Arrow tables in, data files out.
- :class:`DataFileMessage`: a written data file, as the task sends it to the driver.

Accounting and limits:

- :class:`RowCounts`: the rows a batch handed over and those that are dead letters, as
  :meth:`DeadLetterQueue.deliver <icesink.DeadLetterQueue>` takes them.
- :data:`TIMESTAMP_MIN_MICROS`, :data:`TIMESTAMP_MAX_MICROS`: the range of timestamps a
  table column holds (0001-01-01 to 9999-12-31, microseconds since the epoch): a source
  rejects a value outside it as the sink would.
- :data:`TOMBSTONE`: the ``reason`` label of ``icesink_source_records_skipped_total`` for
  records skipped by design (Debezium tombstones).

As in :mod:`icesink`, each name is imported on first use: importing this module loads
nothing of :mod:`sink`, and a Spark worker that needs only the task's writer never loads
the driver's modules. The implementation may move inside :mod:`sink`; this module follows it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sink.batch.arrow_source import ArrowSource
    from sink.batch.source_write import SourceWrite
    from sink.metric_families import TOMBSTONE
    from sink.schema.casts import TIMESTAMP_MAX_MICROS, TIMESTAMP_MIN_MICROS
    from sink.write.messages import DataFileMessage, RowCounts
    from sink.write.source_task import SourceTaskWriter, SourceWritePlan, plan_in_task

_EXPORTS = {
    "ArrowSource": "sink.batch.arrow_source",
    "SourceWrite": "sink.batch.source_write",
    "plan_in_task": "sink.write.source_task",
    "SourceWritePlan": "sink.write.source_task",
    "SourceTaskWriter": "sink.write.source_task",
    "DataFileMessage": "sink.write.messages",
    "RowCounts": "sink.write.messages",
    "TIMESTAMP_MIN_MICROS": "sink.schema.casts",
    "TIMESTAMP_MAX_MICROS": "sink.schema.casts",
    "TOMBSTONE": "sink.metric_families",
}
__all__ = [
    "TIMESTAMP_MAX_MICROS",
    "TIMESTAMP_MIN_MICROS",
    "TOMBSTONE",
    "ArrowSource",
    "DataFileMessage",
    "RowCounts",
    "SourceTaskWriter",
    "SourceWrite",
    "SourceWritePlan",
    "plan_in_task",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'icesink.sources' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
