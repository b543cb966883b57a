"""Avro values framed for a schema registry, read by Spark's own Avro reader (``spark-avro``).

Each schema id of the batch is one ``from_avro`` with the writer's schema from the registry,
in ``PERMISSIVE`` mode (bytes that do not match give null, and the value a dead letter), and
``to_json`` of the record is the payload the decoding pass reads: a Debezium envelope in
Avro (``debezium-avro``) becomes the JSON envelope the Debezium decoder unwraps. Avro's
``int`` and ``long`` become JSON numbers (the decoding pass narrows them as for JSON values),
timestamps ISO-8601 strings, bytes base64. The session needs ``spark-avro`` on its class
path: the Kafka job's session gets it with Spark's Kafka source (:mod:`streaming_jobs.jvm_jars`).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streaming_jobs.kafka.decode.registry import AVRO, RegisteredSchema
from streaming_jobs.kafka.decode.registry_values import payload_column, schema_id_column


class AvroValues:
    """Avro values (see the module), one registry format (:mod:`~.registry_values`)."""

    schema_type = AVRO
    framing = "avro"

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` with the Avro payloads of ``schemas``' ids as JSON behind their header."""
        from pyspark.sql.avro.functions import from_avro

        value = F.col("value")
        schema_id = schema_id_column(value)
        converted: Column | None = None
        for schema_id_value, schema in schemas.items():
            record = from_avro(payload_column(value), schema.text, {"mode": "PERMISSIVE"})
            as_json = F.concat(F.substring(value, 1, 5), F.encode(F.to_json(record), "UTF-8"))
            converted = (F if converted is None else converted).when(schema_id == schema_id_value, as_json)
        assert converted is not None
        return batch_df.withColumn("value", F.coalesce(converted, value))
