"""Step 3 of a micro-batch, route: partition values as Spark expressions, and the shuffle.

* :mod:`icesink.route.router`: the step itself (``distribution-mode`` bucket, hash or none).
* :mod:`icesink.route.transforms`: Iceberg partition transforms as Spark Columns, with
  bucket ids bit-identical to Iceberg Java's (:mod:`icesink.route.murmur3` is the native
  murmur3 behind them, :mod:`icesink.route.arrow_fallback` the Arrow UDFs for the two
  decimal cases Spark cannot compute exactly).
* :mod:`icesink.route.shuffle`: the bucket shuffle, Spark partition id == bucket id, by the
  :mod:`icesink.write.layout` the write tasks read too; :mod:`icesink.route.skew`: hot values
  over several tasks.
* :mod:`icesink.route.self_check`: the start-up checks against the Iceberg spec's hash values;
  :mod:`icesink.route.self_check_runs` runs them once per Spark application.
"""
