"""Many tables from one stream: which table each row goes to, and how one batch reaches them all.

- :mod:`icesink.destinations.naming`: a destination value -> its table (template, sanitizing,
  collisions, ``route.tables``);
- :mod:`icesink.destinations.table_options`: each table's options (``route.table-options``);
- :mod:`icesink.destinations.resolve`: a batch's destinations and their columns (one Spark job);
- :mod:`icesink.destinations.projection`: the one projection normalizing every destination's rows,
  by its slots (:mod:`icesink.destinations.slots`), for each
  :mod:`icesink.destinations.destination_table`.
"""
