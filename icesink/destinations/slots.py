"""The slots of the routed projection (:mod:`icesink.destinations.projection`).

A slot is one (table column name, Spark type) output shared by every destination table
that has such a column; each destination reads its table's columns from its own slots.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.schema.conversion import ColumnConverter
from icesink.schema.diff import match_fields
from icesink.type_mapping import iceberg_to_spark_type

if TYPE_CHECKING:
    from icesink.destinations.destination_table import DestinationTable

SLOT_PREFIX = "__icesink_slot_"

Shape = tuple[tuple[int, ...], str]
"""What a table's conversions depend on: the batch columns offered to it and its fields.

Tables of one shape (topics of one schema, each into its table) share their conversions:
building each is calls into the JVM, for every column of every table.
"""


def shape_of(table: DestinationTable) -> Shape:
    """The shape of ``table`` (its fields as JSON: equal list types of two tables may hash apart)."""
    return table.columns, ",".join(f.model_dump_json() for f in table.schema.fields)


class Slots:
    """The slots of the projection and which destination reads which (see the module docstring)."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], int] = {}
        self._types: list[st.DataType] = []
        self._expressions: list[dict[str, tuple[Column, list[int]]]] = []
        self._of: dict[int, list[int]] = {}
        self._columns: list[Column] = []  # each slot's column, made once
        self._shapes: dict[Shape, list[tuple[tuple[str, str], st.DataType, Column | None, str]]] = {}

    def add(
        self,
        table: DestinationTable,
        fields: list[st.StructField],
        sources: list[Column],
        converter: ColumnConverter,
        case_sensitive: bool,
    ) -> None:
        """Give each column of ``table`` a slot and its conversion there."""
        columns = self._shapes.get(shape_of(table))
        if columns is None:
            columns = self._shapes[shape_of(table)] = converted_columns(
                table, fields, sources, converter, case_sensitive
            )
        mine = self._of.setdefault(table.index, [])
        for key, spark_type, value, text in columns:
            slot = self._keys.setdefault(key, len(self._keys))
            if slot == len(self._types):
                self._types.append(spark_type)
                self._expressions.append({})
            mine.append(slot)
            if value is not None:
                self._expressions[slot].setdefault(text, (value, []))[1].append(table.index)

    def values(self, index: Column) -> list[Column]:
        """Each slot's value: one expression when every destination converts it the same way.

        Args:
            index: The column of a row's destination index.
        """
        result = []
        for slot, (spark_type, expressions) in enumerate(zip(self._types, self._expressions, strict=True)):
            choices = list(expressions.values())
            if not choices:
                value = F.lit(None).cast(spark_type)
            elif len(choices) == 1:
                value = choices[0][0]
            else:
                value = F.when(index.isin(choices[0][1]), choices[0][0])
                for expression, indexes in choices[1:]:
                    value = value.when(index.isin(indexes), expression)
            result.append(value.alias(f"{SLOT_PREFIX}{slot}"))
        return result

    def columns(self) -> list[Column]:
        """Every slot's column, in slot order."""
        self._columns.extend(F.col(f"{SLOT_PREFIX}{s}") for s in range(len(self._columns), len(self._types)))
        return list(self._columns)

    def converted(self, index: int) -> list[Column]:
        """The slots of table ``index``, in its columns' order."""
        columns = self.columns()
        return [columns[s] for s in self._of[index]]

    @property
    def positions(self) -> dict[int, tuple[int, ...]]:
        """Destination index -> input positions of its slots in the write's input (after index and flag)."""
        return {index: tuple(2 + s for s in slots) for index, slots in self._of.items()}


def converted_columns(
    table: DestinationTable,
    fields: list[st.StructField],
    sources: list[Column],
    converter: ColumnConverter,
    case_sensitive: bool,
) -> list[tuple[tuple[str, str], st.DataType, Column | None, str]]:
    """Per column of ``table``: its slot's key and type, and its value there (``None``: not offered)."""
    offered = [fields[p] for p in table.columns]
    matched, _ = match_fields(table.schema.fields, offered, (), case_sensitive)
    conversions = converter.columns([sources[p] for p in table.columns], offered, table.schema.fields)
    columns = []
    for j, field in enumerate(table.schema.fields):
        spark_type = iceberg_to_spark_type(field.field_type)
        key = (field.name, spark_type.simpleString())
        value = conversions[j].value if j in matched else None
        columns.append((key, spark_type, value, "" if value is None else str(value)))
    return columns
