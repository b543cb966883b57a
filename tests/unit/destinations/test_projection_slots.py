"""Tables of one shape share their conversions in the routed projection (icesink.destinations.slots)."""

from __future__ import annotations

from pathlib import Path

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, LongType, NestedField, StringType, StructType

from icesink.destinations.destination_table import DestinationTable
from icesink.destinations.slots import shape_of

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "tags", ListType(4, StringType())),
    NestedField(3, "device", StructType(NestedField(5, "os", StringType()))),
).model_dump_json()


def test_two_tables_of_one_schema_loaded_apart_have_one_shape(tmp_path: Path) -> None:
    catalog = SqlCatalog("default", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("db")
    for name in ("db.a", "db.b"):
        catalog.create_table(name, Schema.model_validate_json(SCHEMA))
    a, b = (catalog.load_table(name).schema() for name in ("db.a", "db.b"))
    # Equal, yet their list types hash apart once loaded: the shape does not rely on those hashes.
    assert a.fields == b.fields
    shapes = {
        shape_of(DestinationTable(0, "db.a", a, (0, 1, 2))),
        shape_of(DestinationTable(1, "db.b", b, (0, 1, 2))),
    }
    assert len(shapes) == 1  # a shape is a dictionary key


def test_other_columns_offered_or_other_types_are_other_shapes() -> None:
    schema = Schema.model_validate_json(SCHEMA)
    shape = shape_of(DestinationTable(0, "db.a", schema, (0, 1, 2)))
    assert shape != shape_of(DestinationTable(0, "db.a", schema, (0, 1)))
    wider = Schema(NestedField(1, "id", StringType()), *schema.fields[1:])
    assert shape != shape_of(DestinationTable(0, "db.a", wider, (0, 1, 2)))
