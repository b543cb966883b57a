"""``icesink-kafka-to-iceberg``: stream Kafka topics into Apache Iceberg tables, exactly once.

::

    icesink-kafka-to-iceberg --config job.yaml [flags that override it]
    python -m icesink.jobs.kafka.job --bootstrap-servers broker:9092 --topics orders \\
        --table analytics.orders --sink-option catalog.uri=... --checkpoint-location /ck/orders
    python -m icesink.jobs.kafka.job ... --topic-pattern 'shop\\..*' \\
        --route-by topic --table-template 'raw.{topic}'      # one table per topic

The configuration (:mod:`icesink.jobs.kafka.job.config`, its ``kafka`` section
:mod:`icesink.jobs.kafka.job.kafka_settings`, read by :mod:`icesink.jobs.kafka.job.cli`;
routing: :mod:`icesink.jobs.kafka.job.routing`) is validated before Spark starts
(:mod:`icesink.jobs.kafka.job.validate`). Then: the Kafka source (Spark's connector, or
``icesink-kafka-decoded``: ``icesink-kafka`` decoding the values where it reads them;
``kafka.source: jvm`` hands the session the connector's jars that ``make env`` fetched,
:mod:`icesink.jobs.jvm_jars`, and a failure of the connector is reported as
``ICESINK-KAFKA-SOURCE``, :mod:`icesink.jobs.kafka.jvm_source`), a
:class:`~icesink.jobs.kafka.decode.sink.DecodingSink` (JSON or Debezium values into typed rows,
undecodable values to the dead-letter table) over an
:class:`~icesink.IcebergSink`, and the checkpoint (one query:
:mod:`icesink.jobs.kafka.job.query`). SIGTERM and SIGINT stop the query between
micro-batches (:mod:`icesink.jobs.kafka.job.stop`); whatever a commit cadence left staged is committed on
the way out. With ``max-restarts``, a query that fails is started again from its
checkpoint, that many times at most (:mod:`icesink.jobs.kafka.job.main`).
"""
