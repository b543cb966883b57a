"""JSON values framed for a schema registry with a JSON Schema (``json-schema``).

The payload after the header is JSON already: the decoding pass reads it as it reads plain
JSON values, its types inferred from the values; the registry is asked only whether it
holds a JSON Schema of each id (a value of an unknown id is a dead letter). The values are
not validated against the schema: the producer's serializer did that. A JSON Schema gives a
field no identity beside its name (no aliases, no numbers): a renamed property is a new
column, and the old column gets no more values.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame

from icesink.jobs.kafka.decode.registry import JSON, RegisteredSchema
from icesink.jobs.kafka.decode.spec import FieldRenames, FieldSourceIds


class JsonSchemaValues:
    """JSON Schema values; a :class:`~icesink.jobs.kafka.decode.registry_values.RegistryFormat`."""

    schema_type = JSON
    framing = "json-schema"

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` as it is: its payloads are JSON."""
        return batch_df

    def task_schemas(self, schemas: Mapping[int, RegisteredSchema]) -> dict[int, bytes | str]:
        """Nothing: the decoding task reads JSON payloads."""
        return {}

    def renamed_fields(self, schemas: Mapping[int, RegisteredSchema]) -> FieldRenames:
        """None: a JSON Schema property has no identity beside its name (see the module)."""
        return ()

    def source_ids(self, schemas: Mapping[int, RegisteredSchema]) -> FieldSourceIds:
        """None: a property is its name."""
        return ()
