"""The driver's story of one micro-batch, for one table or many (the steps: :mod:`icesink.sink`).

One loop writes every batch (:mod:`icesink.batch.plan`): a plan prepares the batch's table
batches, splits its changes and writes them; :mod:`icesink.batch.finish` commits them. The
one-table plan (:mod:`icesink.batch.one_table`) has one destination, the routed plan
(:mod:`icesink.batch.routed`) the destinations it finds in the batch; each keeps its Spark job
shapes (the bucket shuffle and fused source writes, or one resolve job, one projection and one
write job). What is per table is told once, for both:

- :mod:`icesink.batch.tables` opens every table: load or create, key checks, its table batch;
- :class:`~icesink.batch.table_batch.TableBatch` is one table's part of the batch: the replay
  check, evolve, the attempt and its write spec;
- :mod:`icesink.batch.commits` and :mod:`icesink.batch.finish`: the dead letters, then one of
  the commit kinds per table, then the tables' maintenance (:mod:`icesink.maintenance.after_commit`).

``docs/architecture.md`` maps the modules.
"""
