"""Driver side of values framed for a schema registry: one decoder interface, one module per format.

Before the decoding pass, :meth:`RegistryValues.prepare` reads the batch's schema ids (the
framing's bytes 2 to 5, in Spark), asks the registry for those not seen yet
(:mod:`icesink.jobs.kafka.decode.registry`), and hands the ones of the format's type to the
format (:class:`RegistryFormat`), which gives each framed value a JSON payload behind the same
header. The decoding pass (:mod:`icesink.jobs.kafka.decode.framing`) then checks the framing
and the id, and decodes the JSON as for plain JSON values: a new schema version's new field is
a new column, a wider type widens the column, a field made optional takes nulls, a field the
schemas say was renamed (:meth:`RegistryFormat.renamed_fields`) renames its column
(:func:`mark_renamed`). A value that
is not framed, names an id the registry does not know (or a schema of another type), or whose
bytes do not match its schema becomes a dead letter with its reason; the stream goes on.

Formats: :mod:`icesink.jobs.kafka.decode.avro_values` (``avro``, ``debezium-avro``),
:mod:`icesink.jobs.kafka.decode.json_schema_values` (``json-schema``) and
:mod:`icesink.jobs.kafka.decode.protobuf_values` (``protobuf``, read in the decoding task).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink import RENAMED_FROM, SOURCE_ID
from icesink.jobs.kafka.decode.framing import HEADER_BYTES, MAGIC_BYTE
from icesink.jobs.kafka.decode.registry import RegisteredSchema, SchemaRegistry
from icesink.jobs.kafka.decode.spec import DecodeSpec, FieldRenames, FieldSourceIds

logger = logging.getLogger(__name__)
_MAX_BYTES = 2**31 - 1  # "to the end" for substring
_ROW_IMAGES = ("before", "after")  # a Debezium envelope's fields holding the row


class RegistryFormat(Protocol):
    """One format of framed values (see the module)."""

    schema_type: str
    """The registry's ``schemaType`` of its schemas (``AVRO``, ``JSON``, ``PROTOBUF``)."""
    framing: str
    """What the decoding pass is told (:attr:`~icesink.jobs.kafka.decode.spec.DecodeSpec.framing`)."""

    def to_json(self, batch_df: DataFrame, schemas: Mapping[int, RegisteredSchema]) -> DataFrame:
        """``batch_df`` with each framed value of one of ``schemas`` a JSON payload behind its header.

        A value this format cannot read keeps its bytes: the decoding pass rejects it.
        """
        ...

    def task_schemas(self, schemas: Mapping[int, RegisteredSchema]) -> Mapping[int, bytes | str]:
        """What the decoding task needs of each schema to read its payloads (empty: nothing),
        or the reason the job cannot read a schema's values."""
        ...

    def renamed_fields(self, schemas: Mapping[int, RegisteredSchema]) -> FieldRenames:
        """The fields ``schemas`` (and those seen before) say were renamed, with the names they had."""
        ...

    def source_ids(self, schemas: Mapping[int, RegisteredSchema]) -> FieldSourceIds:
        """The fields' identities beside their names in ``schemas`` (after :meth:`task_schemas`)."""
        ...


def schema_id_column(value: Column) -> Column:
    """The schema id of a framed value (null when the value is not framed)."""
    framed = (F.length(value) >= HEADER_BYTES) & (F.substring(value, 1, 1) == F.lit(bytes([MAGIC_BYTE])))
    return F.when(framed, F.conv(F.hex(F.substring(value, 2, 4)), 16, 10).cast("long"))


def payload_column(value: Column) -> Column:
    """The bytes after a framed value's header."""
    return F.substring(value, HEADER_BYTES + 1, _MAX_BYTES)


class RegistryValues:
    """Turns framed values into JSON ones before decoding (see the module).

    Args:
        registry: Where the schemas are.
        value_format: The format of the values.
    """

    def __init__(self, registry: SchemaRegistry, value_format: RegistryFormat) -> None:
        self.registry = registry
        self.format = value_format

    @property
    def framing(self) -> str:
        """What the decoding pass is told the values are."""
        return self.format.framing

    def prepare(self, batch_df: DataFrame, spec: DecodeSpec) -> tuple[DataFrame, DecodeSpec]:
        """The batch with JSON payloads (or ones the task reads), and the decoding pass's spec."""
        ids = [r[0] for r in batch_df.select(schema_id_column(F.col("value"))).distinct().collect()]
        found = self.registry.schemas(i for i in ids if i is not None)
        schemas = {i: s for i, s in found.items() if s.schema_type == self.format.schema_type}
        other = sorted(set(found) - set(schemas))
        if other:
            logger.warning(
                "schema ids %s in the registry are not %s schemas: their values become dead letters",
                other,
                self.format.schema_type,
            )
        for_task = self.format.task_schemas(schemas)
        errors = tuple(sorted((i, s) for i, s in for_task.items() if isinstance(s, str)))
        spec = replace(
            spec,
            schema_ids=frozenset(schemas).difference(i for i, _ in errors),
            task_schemas=tuple(sorted((i, s) for i, s in for_task.items() if isinstance(s, bytes))),
            schema_errors=errors,
        )
        readable = {i: s for i, s in schemas.items() if i in spec.schema_ids}
        spec = replace(
            spec,
            renamed_from=self.format.renamed_fields(readable),
            source_ids=self.format.source_ids(readable),
        )
        if not readable:
            return batch_df, spec
        return self.format.to_json(batch_df, readable), spec


def mark_renamed(schema: st.StructType, spec: DecodeSpec) -> st.StructType:
    """``schema`` with the metadata that makes the sink rename the table's columns (fields inside
    structs too): each renamed field's old names (``icesink.renamed-from``), each field's
    identity beside its name (``icesink.source-id``)."""
    marks: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
    for path, names in spec.renamed_from:
        at = _row_path(path, spec.debezium)
        marks.setdefault(at[:-1], {}).setdefault(at[-1], {})[RENAMED_FROM] = list(names)
    for path, source_id in spec.source_ids:
        at = _row_path(path, spec.debezium)
        marks.setdefault(at[:-1], {}).setdefault(at[-1], {})[SOURCE_ID] = source_id
    return _marked(schema, (), marks) if marks else schema


def _row_path(path: tuple[str, ...], debezium: bool) -> tuple[str, ...]:
    """A field's path in the rows: a Debezium envelope's row image (``before``/``after``) is the row."""
    return path[1:] if debezium and len(path) > 1 and path[0] in _ROW_IMAGES else path


def _marked(
    struct: st.StructType, path: tuple[str, ...], marks: dict[tuple[str, ...], dict[str, dict[str, Any]]]
) -> st.StructType:
    fields = []
    for field in struct.fields:
        data_type = field.dataType
        if isinstance(data_type, st.StructType):
            data_type = _marked(data_type, (*path, field.name), marks)
        metadata = {**(field.metadata or {}), **marks.get(path, {}).get(field.name, {})}
        fields.append(st.StructField(field.name, data_type, field.nullable, metadata))
    return st.StructType(fields)
