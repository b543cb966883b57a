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
