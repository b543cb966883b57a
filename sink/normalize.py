"""Step 1: align a micro-batch to the table's schema.

Columns are matched to the table's by name (case-insensitive), put in the table's
order and cast to the table's types; optional table columns the batch lacks are
filled with nulls.
"""

from __future__ import annotations

from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sink.errors import SchemaError
from sink.schema.convert import iceberg_to_spark_type


def align_to_table(batch_df: DataFrame, schema: Schema, table: str) -> DataFrame:
    """Select the table's columns from ``batch_df``, cast to the table's types.

    Raises:
        SchemaError: The batch has a column the table lacks, or lacks a required one.
    """
    by_name = {name.lower(): name for name in batch_df.columns}
    table_names = {f.name.lower() for f in schema.fields}
    extra = [name for name in batch_df.columns if name.lower() not in table_names]
    if extra:
        raise SchemaError(
            f"batch has columns {extra} that table {table} does not have",
            table=table,
            hint="add them to the table, or drop them in the query before the sink",
        )
    columns: list[Column] = []
    for field in schema.fields:
        spark_type = iceberg_to_spark_type(field.field_type)
        source = by_name.get(field.name.lower())
        if source is None:
            if field.required:
                raise SchemaError(
                    f"batch lacks required column {field.name!r} of table {table}",
                    table=table,
                    hint="select the column in the query, or make it optional in the table",
                )
            columns.append(F.lit(None).cast(spark_type).alias(field.name))
            continue
        column = F.col(f"`{source}`")
        if batch_df.schema[source].dataType != spark_type:
            column = column.cast(spark_type)
        columns.append(column.alias(field.name))
    return batch_df.select(*columns)
