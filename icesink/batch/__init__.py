"""The driver's side of a micro-batch, for one table or many (the steps: :mod:`icesink.sink`).

What is per table is told once for both plans: :mod:`icesink.batch.tables` opens each table,
:class:`~icesink.batch.table_batch.TableBatch` is its part of the batch, :mod:`icesink.batch.finish`
commits it. ``docs/architecture.md`` maps the modules.
"""
