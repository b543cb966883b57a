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
nothing of the library's internals, and a Spark worker that needs only the task's writer
never loads the driver's modules. The implementation may move inside :mod:`icesink`; this
module follows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from icesink._lazy import lazy_names

if TYPE_CHECKING:
    from icesink.batch.source_write import ArrowSource, SourceWrite
    from icesink.metric_families import TOMBSTONE
    from icesink.schema.casts import TIMESTAMP_MAX_MICROS, TIMESTAMP_MIN_MICROS
    from icesink.write.messages import DataFileMessage, RowCounts
    from icesink.write.source_task import SourceTaskWriter, SourceWritePlan, plan_in_task

_EXPORTS = {
    "ArrowSource": "icesink.batch.source_write",
    "SourceWrite": "icesink.batch.source_write",
    "plan_in_task": "icesink.write.source_task",
    "SourceWritePlan": "icesink.write.source_task",
    "SourceTaskWriter": "icesink.write.source_task",
    "DataFileMessage": "icesink.write.messages",
    "RowCounts": "icesink.write.messages",
    "TIMESTAMP_MIN_MICROS": "icesink.schema.casts",
    "TIMESTAMP_MAX_MICROS": "icesink.schema.casts",
    "TOMBSTONE": "icesink.metric_families",
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


__getattr__ = lazy_names(__name__, _EXPORTS)
