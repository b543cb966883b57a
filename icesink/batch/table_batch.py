"""One table's part of one micro-batch: the per-table lifecycle, written once.

Every table a batch writes (the sink's, each routed table, the dead-letter table, the tables a
source's tasks write) goes through a :class:`TableBatch`, from a table opened and a state
recovered once (:mod:`icesink.batch.tables`): the replay check, schema evolution, the attempt
(its write spec, on record before any file is written, so that a crash leaves files a restart
can find: :mod:`icesink.commit.recovery`), then one of the commit kinds (:mod:`icesink.batch.commits`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pyiceberg.table import Table
from pyspark.sql import types as st

from icesink.catalog import executor_io_properties
from icesink.commit import ledger
from icesink.commit.recovery import AttemptLog, AttemptRecord, attempt_location
from icesink.config import SinkConfig
from icesink.log_context import batch_logger
from icesink.maintenance.after_commit import CommittedTable
from icesink.metrics import SinkMetrics
from icesink.schema.coordinator import evolve_table
from icesink.write.spec import WriteSpec

if TYPE_CHECKING:
    from icesink.batch.key import BatchKey
    from icesink.batch.states import TableState, TableStates

__all__ = ["RoutedTarget", "TableBatch"]

logger = batch_logger(__name__)


@dataclass
class TableBatch:
    """One table's part of one attempt of a micro-batch: ``config`` with a routed table's own options
    applied, ``table`` as loaded and evolved for the batch, ``spec`` the attempt's once on record."""

    name: str
    config: SinkConfig
    table: Table
    key: BatchKey
    state: TableState
    spec: WriteSpec | None = field(default=None, repr=False)

    @classmethod
    def of(
        cls,
        states: TableStates,
        name: str,
        config: SinkConfig,
        table: Table,
        key: BatchKey,
        query_id: str | None = None,
    ) -> TableBatch:
        """The batch ``key`` on table ``name``, from the table's state (recovered on first use)."""
        return cls(name, config, table, key, states.get(name, config, table, key.sink_id, query_id))

    @cached_property
    def attempts(self) -> AttemptLog:
        return AttemptLog.for_sink(self.config, self.table, self.key.sink_id)

    def has_batch(self) -> bool:
        key = self.key
        return ledger.is_committed(self.table, key.sink_id, key.batch_id) or self.state.staging.contains(
            key.batch_id
        )

    def replayed(self, metrics: SinkMetrics) -> bool:
        """The replay check: whether the table has the batch already (then counted and logged)."""
        key = self.key
        if not self.has_batch():
            return False
        logger.info(
            "batch %s of sink %s already committed to %s: skipped", key.batch_id, key.sink_id, self.name
        )
        metrics.record_replay(self.name, key.sink_id)
        return True

    def evolve(self, offered: st.StructType, metrics: SinkMetrics) -> Table:
        self.table = evolve_table(
            self.config, self.table, offered, metrics, self.key.sink_id, self.key.batch_id
        )
        return self.table

    def write_spec(self, task_options: Mapping[str, Any], bad_row_flag: bool = False) -> WriteSpec:
        """The write spec of this attempt on the table (``task_options``: how the rows reach the tasks)."""
        table, write = self.table, self.config.write
        properties = table.metadata.properties
        data_location = properties.get("write.data.path", f"{table.location().rstrip('/')}/data")
        prefix = self.key.file_prefix
        return WriteSpec(
            table=self.name,
            schema=table.schema(),
            partition_spec=table.spec(),
            data_location=attempt_location(data_location, prefix),
            io_properties=executor_io_properties(self.config, table),
            table_properties=dict(properties),
            file_prefix=prefix,
            target_file_size_bytes=write.target_file_size(properties),
            row_group_size_bytes=write.row_group_size_bytes,
            memory_budget_bytes=write.memory_budget_bytes,
            compression=str(
                write.setting(properties, "write.parquet.compression-codec", "compression_codec")
            ),
            bad_row_flag=bad_row_flag,
            key_columns=self.config.upsert.key_columns if self.config.upsert.enabled else (),
            **task_options,
        )

    def begin(self, task_options: Mapping[str, Any], bad_row_flag: bool = False) -> WriteSpec:
        """The attempt's write spec, its attempt record on storage first."""
        spec = self.write_spec(task_options, bad_row_flag)
        self.record(spec)
        return spec

    def record(self, spec: WriteSpec) -> None:
        """Put the attempt of ``spec`` (this batch's) on record, before any of its files is written."""
        key = self.key
        record = AttemptRecord(key.sink_id, key.batch_id, key.attempt, spec.file_prefix, spec.data_location)
        self.attempts.begin(record)
        self.spec = spec

    def start(self, spec: WriteSpec, planned: Mapping[str, TableBatch]) -> Callable[[], None]:
        """What puts the attempt of ``spec`` on record, to call before any file is written; nothing
        when a source's tasks have it on record on this table already (``planned``: their batches)."""
        if self.name not in planned:
            return functools.partial(self.record, spec)
        self.spec = spec  # the source's attempt, taken over
        self.__dict__["attempts"] = planned[self.name].attempts
        return lambda: None

    def end(self) -> None:
        """The attempt's files are accounted for elsewhere (committed, staged or deleted)."""
        self.attempts.end(self.key.batch_id, self.key.attempt)

    @property
    def location(self) -> str:
        """The folder of the attempt's files (once on record)."""
        assert self.spec is not None, "begin() first"
        return self.spec.data_location

    def committed(self) -> CommittedTable:
        """The table as its maintenance after the commit sees it (:mod:`icesink.maintenance.after_commit`)."""
        return CommittedTable(
            self.name, self.key.sink_id, self.config, self.table, self.state.lock, self.kept_files
        )

    def kept_files(self) -> Callable[[str], bool]:
        """Whether a file is one the sink still needs: of a staged batch, or under an attempt on record."""
        staged = {f.path for f in self.state.staging.files}
        folders = tuple(
            f"{r.data_location.rstrip('/')}/" for r in self.attempts.open_attempts() if r.data_location
        ) + tuple(f"{b.location.rstrip('/')}/" for b in self.state.staging.batches if b.location)
        return lambda path: path in staged or path.startswith(folders)


@dataclass
class RoutedTarget:
    """A table a routed batch writes: its table batch, the batch columns offered to it, the values
    routed to it, and its index among the batch's tables (in the projection and the write job)."""

    batch: TableBatch
    columns: tuple[int, ...]
    values: tuple[str, ...]
    index: int = -1

    @property
    def name(self) -> str:
        return self.batch.name

    @property
    def config(self) -> SinkConfig:
        return self.batch.config

    @property
    def table(self) -> Table:
        return self.batch.table
