"""Step 3 of a micro-batch, route: partition-key columns computed as Spark expressions.

:mod:`sink.route.transforms` turns an Iceberg partition transform into a Spark Column
whose values equal Iceberg's partition values; :mod:`sink.route.murmur3` is the native
murmur3 hash behind the bucket transform.
"""
