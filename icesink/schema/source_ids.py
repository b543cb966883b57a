"""Source ids: what a source calls a field whatever its name, kept on the table's column.

Some sources identify a field by something that outlives its name: a Protobuf field's
number, a Thrift field id. A batch field carries it as the Spark field metadata
:data:`SOURCE_ID` (a string, e.g. ``protobuf:3``), and the sink keeps it on the column the
field writes, in the column's doc, as a marker ``[icesink.source-id=protobuf:3]`` after any
doc the column has: it is written by the same schema commit as the column (or by one of its
own, :class:`RecordSourceId`, for a column that had none), travels with the column through
renames, and needs no other store. Engines show it as the column's comment.

A later batch field with that source id and another name is the column renamed
(:mod:`icesink.schema.renames`): the column keeps its field id and its data. Source ids are
compared within one struct, as names are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Literal

from pyiceberg.schema import Schema
from pyiceberg.types import NestedField, StructType
from pyspark.sql import types as st

SOURCE_ID = "icesink.source-id"
"""Spark field metadata: the source's identity of a field (a string), kept on its column."""

_MARKER = re.compile(r"\[icesink\.source-id=([^\]]*)\]")


def source_id(field: st.StructField) -> str | None:
    """``field``'s :data:`SOURCE_ID` metadata, if any."""
    value = (field.metadata or {}).get(SOURCE_ID)
    return None if value is None else str(value)


def doc_source_id(doc: str | None) -> str | None:
    """The source id a column's doc keeps, if any."""
    found = _MARKER.search(doc or "")
    return None if found is None else found.group(1)


def doc_with_source_id(doc: str | None, sid: str) -> str:
    """``doc`` with the marker of ``sid`` (after the doc's own text)."""
    marker = f"[{SOURCE_ID}={sid}]"
    return f"{doc} {marker}" if doc else marker


def with_source_id_docs(schema: Schema, spark_schema: st.StructType) -> Schema:
    """``schema`` (made from ``spark_schema``) with each field's source id in its column's doc,
    inside structs too: a table created from a batch keeps them from its first schema."""
    fields = _documented(schema.as_struct(), spark_schema)
    return Schema(
        *fields.fields, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids
    )


def _documented(struct: StructType, spark_struct: st.StructType) -> StructType:
    by_name = {f.name: f for f in spark_struct.fields}
    fields = []
    for field in struct.fields:
        spark_field = by_name.get(field.name)
        field_type, doc = field.field_type, field.doc
        if spark_field is not None:
            if isinstance(field_type, StructType) and isinstance(spark_field.dataType, st.StructType):
                field_type = _documented(field_type, spark_field.dataType)
            sid = source_id(spark_field)
            if sid is not None and doc_source_id(doc) is None:
                doc = doc_with_source_id(doc, sid)
        fields.append(
            NestedField(
                field_id=field.field_id,
                name=field.name,
                field_type=field_type,
                required=field.required,
                doc=doc,
            )
        )
    return StructType(*fields)


@dataclass(frozen=True)
class RecordSourceId:
    """Keep a batch field's source id on the column it writes (which has none yet).

    Attributes:
        path: The column's full path (table names).
        source_id: The field's source id.
        doc: The column's doc with the marker.
    """

    kind: ClassVar[Literal["record_source_id"]] = "record_source_id"
    path: tuple[str, ...]
    source_id: str
    doc: str

    def __str__(self) -> str:
        return f"record source id {self.source_id} of {'.'.join(self.path)}"
