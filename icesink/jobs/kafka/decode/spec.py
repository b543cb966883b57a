"""What the decoding pass is given (:class:`DecodeSpec`), and the columns it reads and adds.

Shared by the driver (:mod:`icesink.jobs.kafka.decode.decoder`, the decoding source) and
the executors (:mod:`icesink.jobs.kafka.decode.task`). Only pyarrow and pyspark's type
objects are imported here.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import types as st

from icesink.jobs.kafka.decode import debezium

KAFKA_INPUT_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp")
TOPIC_COLUMN = "_kafka_topic"
PARTITION_COLUMN = "_kafka_partition"
OFFSET_COLUMN = "_kafka_offset"
TIMESTAMP_COLUMN = "_kafka_timestamp"
KAFKA_COLUMNS = pa.schema(
    [
        pa.field(TOPIC_COLUMN, pa.string()),
        pa.field(PARTITION_COLUMN, pa.int32()),
        pa.field(OFFSET_COLUMN, pa.int64()),
        pa.field(TIMESTAMP_COLUMN, pa.timestamp("us", tz="UTC")),
    ]
)
FieldRenames = tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
"""Fields of the values renamed by their schemas: (path, the names it had), for ``icesink.renamed-from``."""
FieldSourceIds = tuple[tuple[tuple[str, ...], str], ...]
"""Fields of the values with an identity beside their name: (path, source id), for ``icesink.source-id``."""
SPEC_OPTION = "decode.spec"  # the option of a source that decodes as it reads: DecodeSpec.to_json()
PAYLOAD_COMPRESSION: str | None = "lz4"  # cheapest to write and read back; zstd saves memory, not time


@dataclass(frozen=True)
class DecodeSpec:
    """What the decoding pass needs (picklable, shipped to the executors).

    Attributes:
        debezium: Unwrap Debezium change events.
        fixed_schema: Keep only these fields (nested ones too); ``None`` keeps every field.
        metadata_columns: Add the ``_kafka_*`` columns to every row.
        payload_compression: Codec of the decoded streams Spark caches between the passes.
        framing: ``None`` for plain values; the registry format of values framed for a schema
            registry (:mod:`icesink.jobs.kafka.decode.framing`): ``json-schema`` (JSON after the
            header), ``avro`` (the driver turned each Avro payload into JSON after the header),
            ``protobuf`` (the task reads each payload with :attr:`task_schemas`).
        schema_ids: The schema ids the registry holds a schema of that format for.
        task_schemas: What the task needs of each schema id to read its payloads (Protobuf:
            the compiled ``FileDescriptorSet``).
        schema_errors: Schema ids of that format the job cannot read, with the reason their
            values' dead letters get.
        renamed_from: The fields the schemas say were renamed (Avro aliases, Protobuf field
            numbers): the rows' fields carry the names they had, and the sink renames the
            table's columns (driver side; the tasks do not need it).
        source_ids: The fields' identities beside their names (Protobuf field numbers): the
            rows' fields carry them, the columns keep them (driver side too).
    """

    debezium: bool = False
    fixed_schema: st.StructType | None = None
    metadata_columns: bool = True
    payload_compression: str | None = PAYLOAD_COMPRESSION
    framing: str | None = None
    schema_ids: frozenset[int] = frozenset()
    task_schemas: tuple[tuple[int, bytes], ...] = ()
    schema_errors: tuple[tuple[int, str], ...] = ()
    renamed_from: FieldRenames = ()
    source_ids: FieldSourceIds = ()

    def to_json(self) -> str:
        """The spec as a JSON string: how a data source option carries it to the executors."""
        fixed = None if self.fixed_schema is None else self.fixed_schema.jsonValue()
        return json.dumps(
            {
                "debezium": self.debezium,
                "fixed_schema": fixed,
                "metadata_columns": self.metadata_columns,
                "payload_compression": self.payload_compression,
                "framing": self.framing,
                "schema_ids": sorted(self.schema_ids),
                "task_schemas": [[i, base64.b64encode(s).decode()] for i, s in self.task_schemas],
                "schema_errors": [list(e) for e in self.schema_errors],
                "renamed_from": [[list(p), list(n)] for p, n in self.renamed_from],
                "source_ids": [[list(p), i] for p, i in self.source_ids],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> DecodeSpec:
        """The spec of :meth:`to_json`."""
        value = json.loads(text)
        fixed = value["fixed_schema"]
        return cls(
            debezium=bool(value["debezium"]),
            fixed_schema=None if fixed is None else st.StructType.fromJson(fixed),
            metadata_columns=bool(value["metadata_columns"]),
            payload_compression=value["payload_compression"],
            framing=value.get("framing"),
            schema_ids=frozenset(value.get("schema_ids", ())),
            task_schemas=tuple((int(i), base64.b64decode(s)) for i, s in value.get("task_schemas", ())),
            schema_errors=tuple((int(i), str(r)) for i, r in value.get("schema_errors", ())),
            renamed_from=tuple((tuple(p), tuple(n)) for p, n in value.get("renamed_from", ())),
            source_ids=tuple((tuple(p), str(i)) for p, i in value.get("source_ids", ())),
        )

    @property
    def reserved_names(self) -> frozenset[str]:
        """Column names the decoder adds itself: a value may not have such a field."""
        names = set(KAFKA_COLUMNS.names) if self.metadata_columns else set()
        if self.debezium:
            names.update(debezium.COLUMNS)
        return frozenset(names)
