"""The one projection that normalizes the rows of every destination of a batch.

Output, the input of the routed write (:mod:`icesink.write.routed_task`)::

    [dest_index, bad_row_flag, slot_0, ..., slot_K]

A slot is one (table column name, Spark type) output shared by every destination table
that has such a column; each destination reads its table's columns from its own slots.
Per destination, :class:`~icesink.schema.conversion.ColumnConverter` gives each table
column's conversion and problems, exactly as :mod:`icesink.normalize` does for one table.
Destinations whose conversion of a slot is the same expression share it; only differing
ones become a ``CASE dest_index``. A destination that has no source column for a slot
takes whatever the slot holds: its rows hold no value there, so every conversion gives
null. Rows of a destination value that has no table (null, or not in ``route.tables``)
get index :data:`UNROUTABLE` and are flagged, as are rows with a conversion problem; rows
of tables that already committed the batch (a replay) get :data:`SKIPPED` and are left
out. Nothing runs here.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.config import BadRecordPolicy, SchemaEvolution, SinkConfig
from icesink.destinations.destination_table import DestinationTable
from icesink.destinations.resolve import SOURCE_PREFIX, DestinationValue, destination_value, positional
from icesink.destinations.slots import Shape, Slots, shape_of
from icesink.log_context import batch_logger
from icesink.normalize import first_problem
from icesink.schema.conversion import BadRecordReason, ColumnConverter, Problem
from icesink.spark_session import application_id

UNROUTABLE = -1
logger = batch_logger(__name__)

NULL_VALUE_REASON = f"{BadRecordReason.UNROUTABLE.value}: the destination value is null"
SKIPPED = -2
DEST_INDEX = "__icesink_dest_index"
BAD_ROW = "__icesink_bad_row"
_PROBLEM = "__icesink_problem"


@dataclass(frozen=True)
class ProjectionOptions:
    """How :func:`project` treats a batch.

    Attributes:
        route_position: Position of the batch column holding the destination value.
        case_sensitive: Whether column names must match in case.
        evolution_enabled: Whether the schema step may add columns (for messages).
        on_bad_record: ``dlq`` flags bad rows; ``fail`` fails the batch at the first.
        unroutable_source: What a dead letter of an unroutable row names as its table.
    """

    route_position: int
    case_sensitive: bool
    evolution_enabled: bool
    on_bad_record: BadRecordPolicy
    unroutable_source: str

    @classmethod
    def of(cls, config: SinkConfig, route_position: int, unroutable_source: str) -> ProjectionOptions:
        """A routed sink's options of ``config``."""
        schema = config.table_schema
        evolving = schema.evolution is SchemaEvolution.ADD_COLUMNS_AND_WIDEN
        return cls(
            route_position,
            schema.case_sensitive,
            evolving,
            config.dead_letter.on_bad_record,
            unroutable_source,
        )


@dataclass(frozen=True)
class RoutedProjection:
    """The routed batch, ready for the write.

    Attributes:
        rows: ``[dest_index, bad_row_flag, slot_0..slot_K]``.
        slots: Destination index -> input column positions of its table's columns, in order.
        dead_letters: Builds the flagged rows as ``source_table``, ``column``, ``reason``,
            ``value``, ``original_row``; run it only when the write found some.
    """

    rows: DataFrame
    slots: Mapping[int, tuple[int, ...]]
    dead_letters: Callable[[], DataFrame]


def project(
    batch_df: DataFrame,
    tables: Sequence[DestinationTable],
    indexes: Mapping[str, int],
    reasons: Mapping[str, str],
    options: ProjectionOptions,
) -> RoutedProjection:
    """The one projection of ``batch_df`` to every table of ``tables``.

    Args:
        batch_df: The micro-batch.
        tables: Its destination tables (those to write).
        indexes: Destination value -> table index, or :data:`SKIPPED`; any other value is unroutable.
        reasons: Unroutable value -> the dead-letter reason of its rows (a null value's is
            :data:`NULL_VALUE_REASON`).
        options: See :class:`ProjectionOptions`.

    Raises:
        SchemaError: A destination's column has no column in its table.
    """
    plan = _plan_for(batch_df, tables, indexes, reasons, options)
    index = F.col(DEST_INDEX)
    selected = positional(batch_df).select(*plan.selected).filter(index != SKIPPED)
    checked = selected.select(*plan.converted).select(*plan.checked)
    if plan.keep is not None:
        checked = checked.filter(plan.keep)
    rows = checked.select(*plan.rows)

    def dead_letters() -> DataFrame:
        return checked.filter(F.col(_PROBLEM).isNotNull()).select(*plan.dead_letters)

    return RoutedProjection(rows, plan.slots, dead_letters)


@dataclass(frozen=True)
class _Plan:
    """The expressions of one routed projection, by position only: a stream builds them once.

    Building them is thousands of calls into the JVM for hundreds of tables, so they are
    kept per (batch schema, tables and their schemas, value indexes, options), like
    :mod:`icesink.normalize`'s plans.
    """

    selected: tuple[Column, ...]  # dest index, sources
    converted: tuple[Column, ...]  # dest index, slot values, sources
    checked: tuple[Column, ...]  # dest index, problem, slots, sources
    keep: Column | None  # on-bad-record=fail: raises at the first bad row
    rows: tuple[Column, ...]  # dest index, bad-row flag, slots
    dead_letters: tuple[Column, ...]
    slots: dict[int, tuple[int, ...]]


_PLANS: OrderedDict[tuple[object, ...], _Plan] = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 16


def _plan_for(
    batch_df: DataFrame,
    tables: Sequence[DestinationTable],
    indexes: Mapping[str, int],
    reasons: Mapping[str, str],
    options: ProjectionOptions,
) -> _Plan:
    """The cached plan of this batch schema, these tables and options (in this Spark context)."""
    key = (
        application_id(batch_df.sparkSession),  # Columns belong to one JVM
        batch_df.schema.json(),
        tuple((t.index, t.table, t.schema.model_dump_json(), t.columns) for t in tables),
        tuple(sorted(indexes.items())),
        tuple(sorted(reasons.items())),
        options,
    )
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = _build_plan(list(batch_df.schema.fields), tables, indexes, reasons, options)
    with _PLANS_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
    return plan


def _build_plan(
    fields: list[st.StructField],
    tables: Sequence[DestinationTable],
    indexes: Mapping[str, int],
    reasons: Mapping[str, str],
    options: ProjectionOptions,
) -> _Plan:
    sources = [F.col(f"{SOURCE_PREFIX}{i}") for i in range(len(fields))]
    dest = destination_value(sources[options.route_position])
    dest_index = F.lit(UNROUTABLE)
    if indexes:
        lookup = F.create_map(*[c for v, i in sorted(indexes.items()) for c in (F.lit(v), F.lit(i))])
        dest_index = F.coalesce(F.try_element_at(lookup, dest), F.lit(UNROUTABLE))
    index = F.col(DEST_INDEX)
    slots = Slots()
    converters = {
        t.index: ColumnConverter(t.table, options.case_sensitive, options.evolution_enabled) for t in tables
    }
    for table in tables:
        slots.add(table, fields, sources, converters[table.index], options.case_sensitive)
    problem = _problem(tables, fields, sources, converters, slots, dest, _reason(dest, reasons), options)
    flag = F.col(_PROBLEM).isNotNull()
    keep = None
    if options.on_bad_record is BadRecordPolicy.FAIL:
        keep = F.when(~flag | (index == UNROUTABLE), F.lit(True)).otherwise(F.raise_error(_message(tables)))
        flag = index == UNROUTABLE  # the only rows left to flag
    row = F.struct(*[s.alias(f.name) for s, f in zip(sources, fields, strict=True)])
    return _Plan(
        selected=(dest_index.alias(DEST_INDEX), *sources),
        converted=(index, *slots.values(index), *sources),
        checked=(index, problem.alias(_PROBLEM), *slots.columns(), *sources),
        keep=keep,
        rows=(index, flag.alias(BAD_ROW), *slots.columns()),
        dead_letters=(
            _table_name(tables, options.unroutable_source).alias("source_table"),
            *[F.col(_PROBLEM)[c].alias(c) for c in ("column", "reason", "value")],
            F.to_json(row, {"ignoreNullFields": "false"}).alias("original_row"),
        ),
        slots=slots.positions,
    )


def _problem(
    tables: Sequence[DestinationTable],
    fields: list[st.StructField],
    sources: list[Column],
    converters: Mapping[int, ColumnConverter],
    slots: Slots,
    dest: Column,
    reason: Column,
    options: ProjectionOptions,
) -> Column:
    """``struct(column, reason, value)`` of a row's first problem, or null for a good row."""
    index = F.col(DEST_INDEX)
    route_name = fields[options.route_position].name
    unroutable = F.struct(
        F.lit(route_name).alias("column"),
        reason.alias("reason"),
        F.coalesce(dest, F.lit("null")).alias("value"),
    )
    problem = F.when(index == UNROUTABLE, unroutable)
    by_shape: dict[Shape, tuple[Column, str] | None] = {}
    by_expression: dict[str, tuple[Column, list[int]]] = {}
    for table in tables:
        shape = shape_of(table)
        if shape not in by_shape:
            offered = [fields[p] for p in table.columns]
            checks = converters[table.index].columns(
                [sources[p] for p in table.columns],
                offered,
                table.schema.fields,
                converted=slots.converted(table.index),
            )
            problems: list[Problem] = [p for c in checks for p in c.problems]
            first = first_problem(problems) if problems else None
            by_shape[shape] = None if first is None else (first, str(first))
        found = by_shape[shape]
        if found is not None:
            by_expression.setdefault(found[1], (found[0], []))[1].append(table.index)
    for first, indexes in by_expression.values():
        problem = problem.when(index.isin(indexes), first)
    return problem


def _reason(dest: Column, reasons: Mapping[str, str]) -> Column:
    """The dead-letter reason of an unroutable row, by its destination value."""
    if not reasons:
        return F.lit(NULL_VALUE_REASON)
    lookup = F.create_map(*[F.lit(c) for v, r in sorted(reasons.items()) for c in (v, r)])
    return F.coalesce(F.try_element_at(lookup, dest), F.lit(NULL_VALUE_REASON))


def _table_name(tables: Sequence[DestinationTable], unroutable: str) -> Column:
    """The table of a row by its index (``unroutable`` for a row without one)."""
    if not tables:
        return F.lit(unroutable)
    names = F.create_map(*[c for t in tables for c in (F.lit(t.index), F.lit(t.table))])
    return F.coalesce(F.try_element_at(names, F.col(DEST_INDEX)), F.lit(unroutable))


def _message(tables: Sequence[DestinationTable]) -> Column:
    """The ``on-bad-record=fail`` error of a row (value, column, table, reason)."""
    problem = F.col(_PROBLEM)
    return F.concat(
        F.lit("ICESINK-BAD-RECORD: value '"),
        F.regexp_replace(F.substring(problem["value"], 1, 200), r"[\r\n]+", " "),
        F.lit("' of column '"),
        problem["column"],
        F.lit("' cannot be written to table "),
        _table_name(tables, "?"),
        F.lit(" ("),
        problem["reason"],
        F.lit(
            "); hint: set on-bad-record=dlq to send such rows to the dead-letter table instead of "
            "failing the batch, or fix the value at its source"
        ),
    )


def log_unroutable(
    unroutable: Sequence[DestinationValue],
    reasons: Mapping[str, str],
    dead_letter_table: str,
    sink_id: str,
    batch_id: int,
) -> None:
    """One log line per reason code of a batch's unroutable values (garbage makes thousands of values)."""
    by_code: dict[str, list[tuple[int, str]]] = {}
    for d in unroutable:
        reason = NULL_VALUE_REASON if d.value is None else reasons[d.value]
        by_code.setdefault(reason.split(":", 1)[0], []).append((d.rows, reason))
    for code, found in sorted(by_code.items()):
        logger.warning(
            "batch %s of sink %s: %s rows of %s values go to the dead-letter table %s as %s, e.g. %s",
            batch_id,
            sink_id,
            sum(rows for rows, _ in found),
            len(found),
            dead_letter_table,
            code,
            found[0][1],
        )
