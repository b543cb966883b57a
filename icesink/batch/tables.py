"""The tables of a sink's batches opened in one place, one or many (Kafka Connect's ``writerForTable``).

A table is loaded or created for the columns the rows offer (a routed template's only within
``route.max-tables`` and for one destination value, :mod:`icesink.destinations.owners`: a value
refused either way is a dead letter with its reason, never a failed batch), checked as the write
mode asks before anything is written (:mod:`icesink.upsert.checks`), made a table batch from its
state, recovered once, and evolved; a routed batch's tables together, on the catalog pool.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pyiceberg.table import Table
from pyspark.sql import types as st

from icesink import catalog as catalogs
from icesink.batch.table_batch import RoutedTarget, TableBatch
from icesink.config import SinkConfig
from icesink.destinations.owners import ROUTE_VALUE_PROPERTY, TableBudget, check_owner
from icesink.destinations.resolve import DestinationValue
from icesink.errors import ConfigError
from icesink.parallel import run_parallel
from icesink.schema.coordinator import evolve_table
from icesink.upsert.checks import UpsertChecks
from icesink.write.keys import arrow_key_functions

if TYPE_CHECKING:
    from icesink.batch.key import BatchKey
    from icesink.batch.states import SinkParts


@dataclass(frozen=True)
class _Loaded:
    """A table as :meth:`Tables.prepare` found it (``None``: missing), and whether a new one is counted."""

    table: Table | None
    counted: bool


@dataclass
class PreparedTables:
    """The tables of a routed batch: those to write, indexed; the values of those that have the batch
    already (``skipped``); the values refused a table after all, with their dead-letter reason."""

    targets: list[RoutedTarget] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


class Tables:
    """Opens, checks and evolves the tables of a sink's batches; ``reserved``: tables no destination
    value may have (the dead-letter table)."""

    def __init__(
        self, parts: SinkParts, config_for: Callable[[str], SinkConfig], reserved: Sequence[str]
    ) -> None:
        self._catalog = parts.catalog
        self._metrics = parts.metrics
        self._config_for = config_for
        self._states = parts.states
        route = parts.config.route
        self._owned = route.enabled and route.tables is None  # template tables hold one value's rows each
        self._budget = TableBudget(route, parts.catalog, reserved)

    def open(
        self,
        name: str,
        config: SinkConfig,
        offered: st.StructType,
        values: Sequence[str] = (),
        loaded: _Loaded | None = None,
    ) -> tuple[Table | None, dict[str, str]]:
        """Load or create table ``name`` for rows of ``offered`` (``None``: it would pass
        ``route.max-tables``); routed: for ``values``, and the values refused -> why. ``loaded``: the
        table as :meth:`prepare` found it, a new one already counted."""
        table = catalogs.load_table(self._catalog, name) if loaded is None else loaded.table
        if table is None:
            if not (self._budget.reserve(name) if loaded is None else loaded.counted):
                return None, {v: self._budget.refusal(v, name) for v in values}
            owner = {ROUTE_VALUE_PROPERTY: sorted(values)[0]} if self._owned else {}
            if owner:
                config = config.model_copy(update={"table_properties": {**config.table_properties, **owner}})
            try:
                with self._metrics.time_step(name, "schema"):
                    table = catalogs.create_table(self._catalog, config, offered)
            except BaseException:
                self._budget.release(name)
                raise
        if not self._owned:
            return table, {}
        return check_owner(table, name, values)

    def batch_of(
        self, name: str, config: SinkConfig, table: Table, key: BatchKey, query_id: str | None
    ) -> TableBatch:
        """The table batch of ``key`` on ``table``: its keys checked before anything is written (upserted:
        v2, with its keys; appended: no keys, unless allowed), its state recovered on first use."""
        UpsertChecks(config).check_table(table)
        return TableBatch.of(self._states, name, config, table, key, query_id)

    def prepare_table(self, name: str, schema: st.StructType, value: str | None = None) -> Table:
        """Before a stream starts: table ``name`` (routed: of destination ``value``), made ready for
        rows of ``schema`` as a batch would make it.

        Raises:
            ConfigError: The value may not have the table (another value owns it, or it would
                pass ``route.max-tables``), or its partition spec cannot be routed.
        """
        config = self._config_for(name)
        checks = UpsertChecks(config)
        stored = checks.stored_schema(schema)
        table, refused = self.open(name, config, stored, () if value is None else (value,))
        if table is None or refused:
            raise ConfigError(
                f"destination value {value!r} cannot have table {name}: {refused.get(value or '', '')}",
                table=name,
                hint="route the value to a table of its own (route.tables), or raise route.max-tables",
            )
        checks.check_table(table)
        table = evolve_table(config, table, stored, self._metrics, sink_id=None, batch_id=None)
        if value is not None:
            check_keys_in_task(table, name)
        return table

    def prepare(
        self,
        found: list[DestinationValue],
        tables_of: dict[str | None, str | None],
        schema: st.StructType,
        key: BatchKey,
        query_id: str | None = None,
    ) -> PreparedTables:
        """Every table of a routed batch (``query_id``: the streaming query's, for its flushes)."""
        grouped: dict[str, tuple[set[int], list[str]]] = {}
        for d in found:
            name = tables_of[d.value]
            if name is not None and d.value is not None:
                columns, values = grouped.setdefault(name, (set(), []))
                columns.update(d.columns)
                values.append(d.value)
        names = sorted(grouped)
        tables = run_parallel([functools.partial(catalogs.load_table, self._catalog, n) for n in names])
        # New tables counted in name order, not as threads happen to run: a replay decides the same
        loaded = [
            _Loaded(t, t is not None or self._budget.reserve(n)) for n, t in zip(names, tables, strict=True)
        ]
        prepare = functools.partial(self._prepare_table, schema=schema, key=key, query_id=query_id)
        ready = run_parallel(
            [
                functools.partial(
                    prepare, n, tuple(sorted(grouped[n][0])), tuple(sorted(grouped[n][1])), found
                )
                for n, found in zip(names, loaded, strict=True)
            ]
        )
        result = PreparedTables()
        for target, skip, refused in ready:
            result.refused.update(refused)
            if target is None:
                continue
            if skip:
                result.skipped.extend(target.values)
            else:
                target.index = len(result.targets)
                result.targets.append(target)
        return result

    def _prepare_table(
        self,
        name: str,
        columns: tuple[int, ...],
        values: tuple[str, ...],
        loaded: _Loaded,
        schema: st.StructType,
        key: BatchKey,
        query_id: str | None,
    ) -> tuple[RoutedTarget | None, bool, dict[str, str]]:
        config = self._config_for(name)
        if config.upsert.enabled:  # the op and order columns describe a change: not stored
            columns = tuple(p for p in columns if schema.fields[p].name not in config.upsert.change_columns)
        offered = st.StructType([schema.fields[p] for p in columns])
        table, refused = self.open(name, config, offered, values, loaded)  # refused: no series of their own
        values = tuple(v for v in values if v not in refused)
        if table is None or not values:
            return None, False, refused
        self._metrics.start_sink(name, key.sink_id)
        with self._metrics.time_step(name, "schema"):
            batch = self.batch_of(name, config, table, key, query_id)
            target = RoutedTarget(batch, columns, values)
            if batch.replayed(self._metrics):
                return target, True, refused
            batch.evolve(offered, self._metrics)
        check_keys_in_task(batch.table, name)
        return target, False, refused


def check_keys_in_task(table: Table, name: str) -> None:
    """Routed writes compute partition values in the task: the table's spec must allow it."""
    if table.spec().fields and arrow_key_functions(table.spec(), table.schema()) is None:
        raise ConfigError(
            f"table {name} is partitioned by {table.spec()}, whose values a routed write cannot compute "
            "in its write tasks (a transform of a nested or decimal column)",
            table=name,
            hint="partition routed tables by top-level columns of int, long, date, time, timestamp, "
            "string or binary type (route.table-options partition-by)",
        )
