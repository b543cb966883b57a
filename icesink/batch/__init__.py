"""The driver's story of one micro-batch, for one table or many (the steps: :mod:`icesink.sink`).

Every table a batch writes goes through one :class:`~icesink.batch.table_batch.TableBatch`
and one of the commit kinds of :mod:`icesink.batch.commits`; ``docs/architecture.md`` maps
the modules.
"""
