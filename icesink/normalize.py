"""Step 1: normalize a micro-batch to the table's schema and split off the rows that cannot be.

Columns are matched to the table's by name (ignoring case unless
``schema.case-sensitive``), put in the table's order and converted to the table's
types (:mod:`icesink.schema.conversion`); optional columns the batch lacks become null.

All of it is one Spark projection of native expressions (``try_cast``, no Python
UDF). Next to the converted columns it computes one ``problem`` column: a struct
naming the first column of the row that could not be converted, the reason and the
offending value, or null for a good row. The rows handed to the write carry only a
boolean of it, :data:`BAD_ROW_COLUMN`: the write tasks drop the flagged rows and count
them with the rows they received, and the dead letters (the same projection filtered on
the problem, with the original row as JSON) only run when a task found some. (Counting
in Spark instead, with ``observe``, costs the JVM thread that feeds Python more CPU
time than the flag does: ``benchmarks/README.md``, "Figures behind the code's thresholds".)

With ``on-bad-record=fail`` a filter raises (``raise_error``) at the first bad row
instead, so the batch fails before anything is committed; the driver turns the
executor's message back into a :class:`~icesink.errors.BadRecordError`
(:func:`bad_record_error`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from pyiceberg.schema import Schema
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from icesink.config import BadRecordPolicy, SchemaEvolution, SinkConfig
from icesink.errors import BadRecordError
from icesink.log_context import batch_logger
from icesink.schema.conversion import BadRecordReason, ColumnConverter, Problem
from icesink.spark_session import application_id
from icesink.type_mapping import iceberg_to_spark_schema

__all__ = [
    "BAD_ROW_COLUMN",
    "BadRecordReason",
    "NormalizeOptions",
    "NormalizedBatch",
    "bad_record_error",
    "normalize",
]

logger = batch_logger(__name__)

PROBLEM_COLUMN = "__icesink_problem"
BAD_ROW_COLUMN = "__icesink_bad_row"  # true for a row to dead-letter (see NormalizedBatch.bad_row_flag)
DEAD_LETTER_COLUMNS = ("column", "reason", "value", "original_row")
_SOURCE_PREFIX = "__icesink_src_"
_VALUE_PREFIX = "__icesink_value_"
_VALUE_MAX_CHARS = 1024  # of the offending value kept in a dead letter (the whole row is kept as well)
_MESSAGE_VALUE_MAX_CHARS = 200  # of the offending value shown in an error message
_BAD_RECORD_PATTERN = re.compile(
    r"ICESINK-BAD-RECORD: (?P<message>.*?); hint: (?P<hint>.*?)(?: SQLSTATE: \w+)?$", re.MULTILINE
)


@dataclass(frozen=True)
class NormalizeOptions:
    """How :func:`normalize` treats a batch.

    Attributes:
        table: The table's identifier, for messages.
        case_sensitive: Whether column names must match in case.
        on_bad_record: ``dlq`` splits bad rows off; ``fail`` fails the batch at the first.
        dead_letter_table: Where bad rows go, for messages.
        evolution_enabled: Whether the schema step may add columns (for messages).
    """

    table: str
    case_sensitive: bool = False
    on_bad_record: BadRecordPolicy = BadRecordPolicy.DLQ
    dead_letter_table: str = ""
    evolution_enabled: bool = True

    @classmethod
    def from_config(cls, config: SinkConfig, dead_letter_table: str) -> NormalizeOptions:
        """The options of a sink's main table."""
        return cls(
            table=config.table,
            case_sensitive=config.table_schema.case_sensitive,
            on_bad_record=config.dead_letter.on_bad_record,
            dead_letter_table=dead_letter_table,
            evolution_enabled=config.table_schema.evolution is SchemaEvolution.ADD_COLUMNS_AND_WIDEN,
        )


@dataclass(frozen=True)
class NormalizedBatch:
    """A batch aligned to the table.

    Attributes:
        rows: The table's columns, in its order, of its types; with ``bad_row_flag``,
            followed by :data:`BAD_ROW_COLUMN`.
        bad_row_flag: Whether ``rows`` ends with the bad-row flag: true for a row that
            belongs in the dead-letter table, not in the table. Without it every row of
            ``rows`` is good (no row can be bad, or ``on-bad-record=fail`` raises).
        dead_letters: The bad rows, lazily: ``column``, ``reason``, ``value`` and
            ``original_row`` (JSON). Run it only when the write found bad rows.
        range_checks: When every way a row can be bad is a date or timestamp outside the
            range the sink writes, the columns checked (empty when no row can be bad);
            ``None`` when rows can be bad in other ways.
    """

    rows: DataFrame
    bad_row_flag: bool
    range_checks: frozenset[str] | None
    _dead_letters: Callable[[], DataFrame] = field(repr=False)

    @cached_property
    def dead_letters(self) -> DataFrame:
        """The bad rows (see the class docstring)."""
        return self._dead_letters()


def normalize(batch_df: DataFrame, schema: Schema, options: NormalizeOptions) -> NormalizedBatch:
    """Align ``batch_df`` to ``schema``: good rows to write, bad rows to dead-letter.

    Raises:
        SchemaError: The batch has a column the table lacks, or two columns matching
            one table column.
    """
    plan = _plan_for(batch_df, schema, options)
    source = batch_df.toDF(*plan.sources)  # by position: names may repeat in other cases, or contain dots
    converted = source.select(*plan.values, *plan.source_columns)
    checked = converted.select(*plan.value_columns, plan.problem, *plan.source_columns)
    flagged = plan.keep is not None and options.on_bad_record is BadRecordPolicy.DLQ
    if flagged:
        rows = checked.select(*plan.table_columns, F.col(PROBLEM_COLUMN).isNotNull().alias(BAD_ROW_COLUMN))
    elif plan.keep is not None:  # fail: raises at the first bad row
        rows = checked.filter(plan.keep).select(*plan.table_columns)
    else:
        rows = checked.select(*plan.table_columns)

    def dead_letters() -> DataFrame:  # built only when there are some: building a plan costs too
        return checked.filter(F.col(PROBLEM_COLUMN).isNotNull()).select(*plan.dead_letter_columns)

    return NormalizedBatch(rows, flagged, plan.range_checks, dead_letters)


@dataclass(frozen=True)
class _Plan:
    """The expressions normalizing batches of one schema into one table schema.

    They name columns by position only (``__icesink_src_<i>``, ``__icesink_value_<i>``), so
    they serve every batch of the same shape: a stream builds them once, not per batch
    (building them is thousands of calls into the JVM for a wide table).
    """

    sources: tuple[str, ...]
    source_columns: tuple[Column, ...]  # Columns, not names: a name costs a JVM call per batch
    values: tuple[Column, ...]  # converted, aliased __icesink_value_<i>
    value_columns: tuple[Column, ...]
    problem: Column  # aliased PROBLEM_COLUMN
    keep: Column | None  # the good-row filter (None: no row can be bad)
    range_checks: frozenset[str] | None  # see NormalizedBatch
    value_checks: tuple[frozenset[str], frozenset[str]] | None  # see value_checks
    table_columns: tuple[Column, ...]
    dead_letter_columns: tuple[Column, ...]


_PLANS: OrderedDict[tuple[str, str, str, NormalizeOptions], _Plan] = OrderedDict()
_PLANS_LOCK = threading.Lock()
_PLANS_KEPT = 64


def value_checks(
    spark: SparkSession, batch_schema: st.StructType, schema: Schema, options: NormalizeOptions
) -> tuple[frozenset[str], frozenset[str]] | None:
    """When every way a row of a batch of ``batch_schema`` can be bad is a date or timestamp out
    of range or a null in a required column: those columns, ``(range checked, required)``;
    ``None`` when there are other ways. Without a DataFrame."""
    return _plan_of(spark, batch_schema, schema, options).value_checks


def is_table_schema(batch_schema: st.StructType, schema: Schema) -> bool:
    """Whether ``batch_schema`` has the table's columns, names and types, in its order: normalizing
    such a batch changes nothing but may find bad rows (:attr:`NormalizedBatch.range_checks`)."""
    table_fields = iceberg_to_spark_schema(schema).fields
    return len(batch_schema.fields) == len(table_fields) and all(
        b.name == t.name and b.dataType == t.dataType
        for b, t in zip(batch_schema.fields, table_fields, strict=True)
    )


def checked_elsewhere(rows: DataFrame) -> NormalizedBatch:
    """``rows`` of the table's schema (:func:`is_table_schema`), with no bad row: their ranges were
    checked as they were collected (:mod:`icesink.batch.collected`)."""

    def no_dead_letters() -> DataFrame:
        raise AssertionError("rows checked before the write have no dead letters")

    return NormalizedBatch(rows, False, frozenset(), no_dead_letters)


def _plan_for(batch_df: DataFrame, schema: Schema, options: NormalizeOptions) -> _Plan:
    return _plan_of(batch_df.sparkSession, batch_df.schema, schema, options)


def _plan_of(
    spark: SparkSession, batch_schema: st.StructType, schema: Schema, options: NormalizeOptions
) -> _Plan:
    """The cached plan for this batch schema, table schema and options (in this Spark context)."""
    context = application_id(spark)  # Columns belong to one JVM
    key = (context, batch_schema.json(), schema.model_dump_json(), options)
    with _PLANS_LOCK:
        plan = _PLANS.get(key)
        if plan is not None:
            _PLANS.move_to_end(key)
            return plan
    plan = _build_plan(list(batch_schema.fields), schema, options)
    with _PLANS_LOCK:
        _PLANS[key] = plan
        while len(_PLANS) > _PLANS_KEPT:
            _PLANS.popitem(last=False)
    return plan


def _build_plan(source_fields: list[st.StructField], schema: Schema, options: NormalizeOptions) -> _Plan:
    names = tuple(f"{_SOURCE_PREFIX}{i}" for i in range(len(source_fields)))
    converter = ColumnConverter(options.table, options.case_sensitive, options.evolution_enabled)
    sources = [F.col(n) for n in names]
    columns = converter.columns(sources, source_fields, schema.fields)
    value_names = tuple(f"{_VALUE_PREFIX}{i}" for i in range(len(columns)))
    # The problems test the converted columns, so each value is converted once per row.
    checks = converter.columns(
        sources, source_fields, schema.fields, converted=[F.col(v) for v in value_names]
    )
    problems = [p for c in checks for p in c.problems]
    values = _value_checks(problems)
    problem = F.col(PROBLEM_COLUMN)
    if not problems:
        keep = None
    elif options.on_bad_record is BadRecordPolicy.FAIL:
        keep = F.when(problem.isNull(), F.lit(True)).otherwise(F.raise_error(_message(options)))
    else:
        keep = problem.isNull()
    row = F.struct(*[F.col(n).alias(f.name) for n, f in zip(names, source_fields, strict=True)])
    return _Plan(
        sources=names,
        source_columns=tuple(sources),
        values=tuple(c.value.alias(v) for c, v in zip(columns, value_names, strict=True)),
        value_columns=tuple(F.col(v) for v in value_names),
        problem=first_problem(problems).alias(PROBLEM_COLUMN),
        keep=keep,
        range_checks=values[0] if values is not None and not values[1] else None,
        value_checks=values,
        table_columns=tuple(F.col(v).alias(f.name) for v, f in zip(value_names, schema.fields, strict=True)),
        dead_letter_columns=(
            *[problem[c].alias(c) for c in DEAD_LETTER_COLUMNS[:3]],
            F.to_json(row, {"ignoreNullFields": "false"}).alias("original_row"),
        ),
    )


def _value_checks(problems: list[Problem]) -> tuple[frozenset[str], frozenset[str]] | None:
    ranged = frozenset(p.path for p in problems if p.range_check)
    required = frozenset(p.path for p in problems if p.reason is BadRecordReason.NULL_IN_REQUIRED)
    others = [p for p in problems if not p.range_check and p.reason is not BadRecordReason.NULL_IN_REQUIRED]
    return None if others else (ranged, required)


def check_normalizes(schema: st.StructType, table_schema: Schema, options: NormalizeOptions) -> None:
    """Check that batches of ``schema`` normalize to ``table_schema`` (in the active session, if any).

    Raises:
        SchemaError: A column of ``schema`` cannot go to the table.
    """
    spark = SparkSession.getActiveSession()
    if spark is not None:
        normalize(spark.createDataFrame([], schema), table_schema, options)


def bad_record_error(text: str, table: str, batch_id: int) -> BadRecordError | None:
    """The :class:`BadRecordError` a write task raised (it reaches the driver as text), or ``None``."""
    match = _BAD_RECORD_PATTERN.search(text)
    if match is None:
        return None
    return BadRecordError(match["message"], hint=match["hint"], table=table, batch_id=batch_id)


def first_problem(problems: list[Problem]) -> Column:
    """``struct(column, reason, value)`` of the row's first problem, or null for a good row."""
    if not problems:
        return F.lit(None).cast("struct<column:string,reason:string,value:string>")
    expression: Column | None = None
    for p in problems:
        report = F.struct(
            F.lit(p.path).alias("column"),
            F.lit(p.reason_text).alias("reason"),
            F.substring(F.coalesce(p.value, F.lit("null")), 1, _VALUE_MAX_CHARS).alias("value"),
        )
        expression = (
            F.when(p.condition, report) if expression is None else expression.when(p.condition, report)
        )
    assert expression is not None
    return expression


def _message(options: NormalizeOptions) -> Column:
    """The ``on-bad-record=fail`` error, built per row in Spark (value, column, reason)."""
    problem = F.col(PROBLEM_COLUMN)
    value = F.regexp_replace(F.substring(problem["value"], 1, _MESSAGE_VALUE_MAX_CHARS), r"[\r\n]+", " ")
    return F.concat(
        F.lit("ICESINK-BAD-RECORD: value '"),
        value,
        F.lit("' of column '"),
        problem["column"],
        F.lit(f"' cannot be written to table {options.table} ("),
        problem["reason"],
        F.lit(
            "); hint: set on-bad-record=dlq to send such rows to the dead-letter table "
            f"{options.dead_letter_table} instead of failing the batch, or fix the value at its source"
        ),
    )
