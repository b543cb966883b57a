"""Many tables from one stream: which table each row goes to, and how one batch reaches them all.

- :mod:`sink.destinations.naming`: a destination value -> its table (template, sanitizing,
  collisions, ``route.tables``);
- :mod:`sink.destinations.table_options`: each table's options (``route.table-options``);
- :mod:`sink.destinations.resolve`: a batch's destinations and their columns (one Spark job);
- :mod:`sink.destinations.projection`: the one projection normalizing every destination's rows,
  by its slots (:mod:`sink.destinations.slots`), for each
  :mod:`sink.destinations.destination_table`.
"""
