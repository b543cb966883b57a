"""Avro values framed for a schema registry, read by Spark's own Avro reader (``spark-avro``).

Each schema id of the batch is one ``from_avro`` with the writer's schema from the registry,
in ``PERMISSIVE`` mode, and ``to_json`` of the record is the payload the decoding pass reads.
``PERMISSIVE`` gives a record of nulls for bytes that do not match the schema, which a record
whose fields are all null would give too: the reader's schema is the writer's plus a field
:data:`DECODED_FIELD` whose default is true, so the records Avro did read have it true, and
the other values keep their bytes and become dead letters. A Debezium envelope in
Avro (``debezium-avro``) becomes the JSON envelope the Debezium decoder unwraps. Avro's
``int`` and ``long`` become JSON numbers (the decoding pass narrows them as for JSON values),
timestamps ISO-8601 strings, bytes base64. The session needs ``spark-avro`` on its class
path: the Kafka job's session gets it with Spark's Kafka source (:mod:`icesink.jobs.jvm_jars`).
A schema that references other subjects' schemas is not read (``from_avro`` takes one schema
text): its values become dead letters saying so. A field whose ``aliases`` name another field
is that field renamed (:mod:`icesink.jobs.kafka.decode.avro_aliases`): older versions' values
are read under its new name, and the table's column is renamed, keeping its data.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from icesink.jobs.kafka.decode.avro_aliases import AvroAliases
from icesink.jobs.kafka.decode.registry import AVRO, RegisteredSchema
from icesink.jobs.kafka.decode.registry_values import payload_column, schema_id_column
from icesink.jobs.kafka.decode.spec import FieldRenames, FieldSourceIds

logger = logging.getLogger(__name__)
DECODED_FIELD = "_icesink_decoded"  # true in every record Avro read (see the module)


class AvroValues:
    """Avro values (see the module), one registry format (:mod:`~.registry_values`)."""

    schema_type = AVRO
    framing = "avro"

    def __init__(self) -> None:
        self._aliases = AvroAliases()

    def renamed_fields(self, schemas: Mapping[int, RegisteredSchema]) -> FieldRenames:
        """The fields the aliases of ``schemas``, and of the schemas seen before, rename."""
        for schema_id, schema in sorted(schemas.items()):
            self._aliases.learn(schema_id, schema.text)
        return self._aliases.renamed()

    def source_ids(self, schemas: Mapping[int, RegisteredSchema]) -> FieldSourceIds:
        """None: a field is its name (and its aliases)."""
        return ()

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` with the Avro payloads of ``schemas``' ids as JSON behind their header."""
        from pyspark.sql.avro.functions import from_avro

        value = F.col("value")
        schema_id = schema_id_column(value)
        converted: Column | None = None
        self.renamed_fields(schemas)
        for schema_id_value, schema in schemas.items():
            reader = _reader_schema(schema.text, self._aliases)
            if reader is None:
                logger.warning(
                    "schema id %s is not an Avro record: its values become dead letters", schema_id_value
                )
                continue
            options = {"mode": "PERMISSIVE", "avroSchema": reader}
            record = from_avro(payload_column(value), schema.text, options)
            as_json = F.concat(
                F.substring(value, 1, 5), F.encode(F.to_json(record.dropFields(DECODED_FIELD)), "UTF-8")
            )
            read = (schema_id == schema_id_value) & F.coalesce(record[DECODED_FIELD], F.lit(False))
            converted = (F if converted is None else converted).when(read, as_json)
        if converted is None:
            return batch_df
        return batch_df.withColumn("value", F.coalesce(converted, value))

    def task_schemas(self, schemas: Mapping[int, RegisteredSchema]) -> dict[int, bytes | str]:
        """Nothing for the task, which reads JSON payloads; the schemas Spark cannot read, and why."""
        return {
            schema_id: (
                "the Avro schema references other subjects' schemas "
                f"({', '.join(n for n, _ in s.references)}), which Spark's from_avro cannot "
                "resolve: register the record with its named types inline"
            )
            for schema_id, s in schemas.items()
            if s.references
        }


def _reader_schema(writer: str, aliases: AvroAliases) -> str | None:
    """The writer's record schema, its fields under their newest names, plus :data:`DECODED_FIELD`;
    ``None`` when it is not a record."""
    try:
        schema = json.loads(writer)
    except ValueError:
        return None
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "record"
        or not isinstance(schema.get("fields"), list)
    ):
        return None
    field = {"name": DECODED_FIELD, "type": "boolean", "default": True}
    reader = aliases.reader(schema)
    return json.dumps({**reader, "fields": [*reader["fields"], field]})
