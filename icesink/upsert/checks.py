"""What upsert mode asks of a table and of a batch before anything is written, and what append mode asks.

An upserted table is of format v2 (position deletes) and has the key columns; a batch of
changes has every key column. An appended table has no identifier fields: a row whose key
the table holds would be stored twice (unless ``write.allow-append-to-keyed-table``).
Each failure is an error naming the table, what is missing and the option that fixes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyiceberg.table import Table
from pyspark.sql import types as st

from icesink.commit.snapshot import require_format_v2
from icesink.config import SinkConfig
from icesink.errors import KeyedTableError, UpsertError


class UpsertChecks:
    """What upsert mode asks of a table and a batch, for one table's configuration.

    Args:
        config: The table's configuration (its ``upsert`` section).
    """

    def __init__(self, config: SinkConfig) -> None:
        self.config = config
        self.enabled = config.upsert.enabled
        self._keys = list(config.upsert.key_columns)

    def stored_schema(self, schema: st.StructType) -> st.StructType:
        """The columns of ``schema`` the table stores: all but the op and order columns."""
        if not self.enabled:
            return schema
        dropped = set(self.config.upsert.change_columns)
        return st.StructType([f for f in schema.fields if f.name not in dropped])

    def check_table(self, table: Table) -> None:
        """Before anything is written: an upserted table is of format v2 and has the key columns;
        an appended one has no identifier fields, unless ``write.allow-append-to-keyed-table``.

        Raises:
            UpsertError: Naming the table and what is missing.
            KeyedTableError: Append mode, and the table has identifier fields.
        """
        if not self.enabled:
            self._check_append(table)
            return
        require_format_v2(table)
        names = set(table.schema().column_names)
        missing = [k for k in self._keys if k not in names]
        if missing:
            raise UpsertError(
                f"table {self.config.table} has no key columns {missing} (columns: {sorted(names)})",
                table=self.config.table,
                hint="set upsert.key-columns to columns of the table",
            )

    def _check_append(self, table: Table) -> None:
        schema = table.schema()
        if not schema.identifier_field_ids or self.config.upsert.allow_append_to_keyed_table:
            return
        keys = [schema.find_column_name(i) for i in schema.identifier_field_ids]
        raise KeyedTableError(
            f"table {self.config.table} has identifier fields {keys} (a table upserted by key) but this "
            "sink appends (write.mode=append): a row whose key the table holds would store it twice",
            table=self.config.table,
            hint=f"upsert into it with write.mode=upsert and upsert.key-columns={','.join(map(str, keys))}, "
            "or set write.allow-append-to-keyed-table=true if the appended rows' keys are new to the "
            "table or duplicates are wanted",
        )

    def check_keys(self, columns: Sequence[str]) -> None:
        """Upsert mode: ``columns`` (a batch's) include every key column.

        Raises:
            UpsertError: Naming the missing key columns, the batch's columns and the option.
        """
        if not self.enabled:
            return
        case_sensitive = self.config.table_schema.case_sensitive
        present = set(columns) if case_sensitive else {c.lower() for c in columns}
        missing = [k for k in self._keys if (k if case_sensitive else k.lower()) not in present]
        if missing:
            raise UpsertError(
                f"the batch has no key column {missing} of option 'upsert.key-columns' "
                f"({','.join(self._keys)}); its columns are {list(columns)}",
                table=self.config.table,
                hint="give every change row its key columns, or set upsert.key-columns to the "
                "batch's key column(s) (those of the table's identifier fields)",
            )
