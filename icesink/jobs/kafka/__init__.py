"""The Kafka job's input: the ``icesink-kafka`` source and the decoding of Kafka values.

- :mod:`icesink.jobs.kafka.source`: a Kafka streaming source (Spark's ``kafka`` format
  options and schema) over confluent-kafka, for where Spark's JVM connector is missing;
- :mod:`icesink.jobs.kafka.decode`: Kafka values (JSON, Debezium) into typed rows, then
  into the sink.

Both use the library through :mod:`icesink`; the library never imports them. They need the ``kafka`` extra
(``pip install 'icesink[kafka]'``).
"""
