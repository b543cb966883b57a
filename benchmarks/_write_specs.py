"""The write spec of a benchmark's table: a task's writer run in this process, on the table's own terms."""

from __future__ import annotations

from pyiceberg.table import Table

from icesink.write.spec import WriteSpec


def table_write_spec(
    table: Table,
    file_prefix: str,
    *,
    target_file_size_bytes: int,
    row_group_size_bytes: int,
    memory_budget_bytes: int,
    name: str | None = None,
    partition_values_in_task: bool = True,
) -> WriteSpec:
    """A ``WriteSpec`` writing ``table``'s data files (zstd) under its ``data`` folder.

    Its schema, spec, file system and properties are the table's; ``name`` (the table's
    identifier by default) is what the files' messages name.
    """
    schema = table.schema()
    return WriteSpec(
        table=name or ".".join(table.name()),
        schema=schema,
        partition_spec=table.spec(),
        data_location=f"{table.location()}/data",
        io_properties=dict(table.io.properties),
        table_properties=dict(table.metadata.properties),
        file_prefix=file_prefix,
        target_file_size_bytes=target_file_size_bytes,
        row_group_size_bytes=row_group_size_bytes,
        memory_budget_bytes=memory_budget_bytes,
        compression="zstd",
        num_data_columns=len(schema.fields),
        partition_values_in_task=partition_values_in_task,
    )
