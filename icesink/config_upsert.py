"""The upsert section of the sink's configuration (``write.mode``, ``upsert.*``).

Kept apart from :mod:`icesink.config` so that module stays one screenful per section; the
model is a section of :class:`~icesink.config.SinkConfig` like the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from icesink.errors import ConfigError

DEFAULT_OP_COLUMN = "_op"
DEFAULT_ALLOW_APPEND_TO_KEYED_TABLE = False
DEFAULT_LOOKUP_DRIVER_MAX_FILES = 32
DEFAULT_KEY_INDEX = True
DEFAULT_KEY_INDEX_CACHE_BYTES = 512 * 1024 * 1024


class WriteMode(StrEnum):
    """What a batch does to the table (``write.mode``)."""

    APPEND = "append"  # every row is a new row
    UPSERT = "upsert"  # the last change per key replaces or deletes the key's row


class UpsertConfig(BaseModel):
    """How change rows are applied in upsert mode.

    Attributes:
        mode: ``append`` (default) or ``upsert`` (``write.mode``).
        key_columns: The key columns (``upsert.key-columns``, a comma list); required in
            upsert mode. They become the table's identifier fields.
        op_column: The change's operation (``upsert.op-column``): ``c``, ``r``, ``u``
            insert or replace, ``d`` deletes; a batch without it is all insert-or-replace.
        order_column: Orders the changes of one key within a batch (``upsert.order-column``);
            without it the last row in the batch's order wins.
        allow_append_to_keyed_table: Whether an append-mode sink may write to a table with
            identifier fields (``write.allow-append-to-keyed-table``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: WriteMode = WriteMode.APPEND
    key_columns: tuple[str, ...] = ()
    op_column: str = Field(default=DEFAULT_OP_COLUMN, min_length=1)
    order_column: str | None = Field(default=None, min_length=1)
    allow_append_to_keyed_table: bool = Field(
        default=DEFAULT_ALLOW_APPEND_TO_KEYED_TABLE,
        description=(
            "Let a sink in write.mode=append write to a table that has identifier fields (a keyed "
            "table, such as one a write.mode=upsert sink created and upserts by key). Appended rows "
            "are added as they are, never looked up: a row whose key the table already holds stores "
            "that key twice, and a later upsert of the key does not tell the copies apart. Off by "
            "default: such a sink fails its first batch (and prepare()) with ICESINK-KEYED-TABLE, "
            "naming the table and its identifier fields, before writing anything. Set it to true "
            "only when the appended rows' keys are known to be new to the table or duplicates are "
            "wanted; to change rows by key, use write.mode=upsert with upsert.key-columns instead."
        ),
    )

    lookup_driver_max_files: int = Field(
        default=DEFAULT_LOOKUP_DRIVER_MAX_FILES,
        ge=0,
        description=(
            "The most data files a lookup reads (those whose partition and key-column bounds can "
            "hold one of the batch's keys) for it to run in the driver's own process instead of as a "
            "Spark job, if they hold at most 1,000,000 rows. A Spark job has a fixed cost of a fraction "
            "of a second; a small lookup (a CDC batch of a few thousand changes touching a few files) "
            "is done sooner by the driver reading the files' key columns itself, one after the other. "
            "Larger lookups run as one Spark job of at most one task per partition touched and at most "
            "the application's default parallelism, whatever spark.sql.shuffle.partitions says; either "
            "way a batch adds at most one position delete file per partition. 0: always a Spark job (a "
            "driver that should not read data files)."
        ),
    )

    key_index: bool = Field(
        default=DEFAULT_KEY_INDEX,
        description=(
            "Look a batch's keys up in the table's key index instead of the key columns of every data "
            "file that can hold them. The index maps every live key of a partition to its data file and "
            "row position; it is kept with the table as Puffin files in its metadata folder, each the "
            "statistics file of the snapshot it describes (committed in the same commit as the batch; "
            "other engines ignore it, and orphan removal keeps what the table metadata names). Each batch "
            "reads only the partitions its keys can be in, catches up with what other writers committed "
            "since (compaction, appends, position deletes) from the files they added, and writes only "
            "the partitions it changed (a partition's full blob every few batches). A missing or "
            "unreadable index is rebuilt from the data files once (a warning and "
            "icesink_key_index_rebuilds_total), never failing the batch. The lookup's cost then stays "
            "flat as the table's history grows, where reading the data files grows with their number. "
            "false: every batch reads the key columns of the candidate data files, on the driver or in "
            "one Spark job (upsert.lookup-driver-max-files)."
        ),
    )
    key_index_cache_bytes: int = Field(
        default=DEFAULT_KEY_INDEX_CACHE_BYTES,
        ge=0,
        description=(
            "The most bytes of the key index the driver keeps decoded in memory between batches, per "
            "table (about 20 bytes per key of a long key column). Within it, a batch reads only the index "
            "blobs that changed since; past it, the least recently used partitions are read again from "
            "the table's files when a batch touches them."
        ),
    )

    @field_validator("key_columns", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            names = [name.strip() for name in value.split(",")]
            if any(not name for name in names):
                raise ValueError("must be a comma-separated list of column names, e.g. 'id' or 'tenant,id'")
            return tuple(names)
        return value

    @property
    def enabled(self) -> bool:
        """Whether batches are upserted."""
        return self.mode is WriteMode.UPSERT

    @property
    def change_columns(self) -> tuple[str, ...]:
        """The columns that describe a change and are not stored in the table."""
        return (self.op_column,) + ((self.order_column,) if self.order_column else ())


def with_table_options(upsert: UpsertConfig, options: Mapping[str, str]) -> UpsertConfig:
    """``upsert`` with the ``write.mode`` and ``upsert.key-columns`` of a routed table's overrides.

    Raises:
        ValidationError: The mode is not ``append`` or ``upsert``, or the key list has an empty name.
    """
    update: dict[str, str] = {}
    if "write.mode" in options:
        update["mode"] = options["write.mode"].strip().lower()
    if "upsert.key-columns" in options:
        update["key_columns"] = options["upsert.key-columns"]
    return UpsertConfig.model_validate({**upsert.model_dump(), **update}) if update else upsert


def check_upsert(upsert: UpsertConfig) -> None:
    """Upsert mode: key columns given, not among the change columns.

    Raises:
        ConfigError: Naming the option, its value and the fix.
    """
    if not upsert.enabled:
        if upsert.key_columns:
            raise ConfigError(
                f"option 'upsert.key-columns' is {','.join(upsert.key_columns)!r} "
                "but 'write.mode' is 'append'",
                hint="set write.mode=upsert to upsert by these keys, or remove upsert.key-columns",
            )
        return
    if not upsert.key_columns:
        raise ConfigError(
            "option 'write.mode' is 'upsert' but 'upsert.key-columns' is not set",
            hint="set upsert.key-columns to the key column(s), e.g. upsert.key-columns=id",
        )
    clash = sorted(set(upsert.key_columns) & set(upsert.change_columns))
    if clash:
        raise ConfigError(
            f"option 'upsert.key-columns' names {clash}, which is the op or order column",
            hint="the op and order columns describe a change and are not stored: pick other key columns",
        )
