"""A one-table upsert batch bound for the driver, collected there at once and split by pyarrow.

When the sink's previous batch of the table was small enough for the driver to write it
(:meth:`~icesink.route.router.BucketRouter.writes_in_driver`), the rows go to the driver
anyway. Collected as they came (one Spark job), the batch is split there
(:func:`~icesink.upsert.changes.change_set`: the last change per key by the order column,
then by the batch's order, as Spark's window does) and written by the driver, without the
Spark path's other jobs: the split's (rejected changes counted, deletes collected), the
window's shuffle and the collect of its result. The keys to look up are the last changes'.

Only when nothing needs Spark on the way: the batch's stored columns are the table's (names
and types, in its order: normalizing would change nothing), the key columns are of types
Arrow groups as Spark does (not floating point: Spark makes NaN equal NaN and -0.0 equal
0.0), every row written is good (no null in a required column, every date and timestamp
within the range the sink writes: the only bad rows such a batch may have), and no change is
rejected (a null key, an unknown op, a truncate). Any other batch takes the Spark path
(:class:`~icesink.batch.changes.ChangeSplit`), which sets aside and dead-letters what it must;
one found so after its collect is read again there.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
from pyiceberg.table import Table
from pyspark.sql import DataFrame
from pyspark.sql import types as st

from icesink.batch.changes import ChangeBatch
from icesink.config import SinkConfig
from icesink.destinations.resolve import quoted
from icesink.normalize import NormalizeOptions, is_table_schema, value_checks
from icesink.schema.casts import arrow_range, in_arrow_range
from icesink.schema.names import column_named
from icesink.upsert.changes import change_set
from icesink.upsert.checks import UpsertChecks

__all__ = ["collect_changes"]

_UNGROUPED = (st.FloatType, st.DoubleType)  # Spark's grouping normalizes NaN and -0.0, Arrow's does not


def collect_changes(
    batch_df: DataFrame, config: SinkConfig, table: Table, options: NormalizeOptions
) -> ChangeBatch | None:
    """``batch_df`` (it has every key column) split in the driver (see the module), or ``None``:
    it takes the Spark path."""
    stored = UpsertChecks(config).stored_schema(batch_df.schema)
    schema, types = table.schema(), {f.name: f.dataType for f in stored.fields}
    if not is_table_schema(stored, schema):
        return None
    checks = value_checks(batch_df.sparkSession, stored, schema, options)
    keys = list(config.upsert.key_columns)
    if checks is None or not checks[0] | checks[1] <= types.keys():
        return None  # a bad row of another kind, or a nested column's
    if any(isinstance(types[k], _UNGROUPED) for k in keys):
        return None
    ranged, required = checks
    case_sensitive = config.table_schema.case_sensitive
    op = column_named(batch_df.columns, config.upsert.op_column, case_sensitive)
    order = column_named(batch_df.columns, config.upsert.order_column, case_sensitive)
    if op is not None and not isinstance(batch_df.schema[op].dataType, st.StringType):
        return None  # Spark compares the ops as text, and rejects those that are not
    try:
        split = change_set(batch_df.toArrow(), keys, op, order)
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # a key or order type Arrow cannot group or sort
        return None
    if split.rejected.num_rows:
        return None
    # In key order, as Spark's window leaves them: the files' keys sorted compress well, and the
    # key index takes them as they are.
    rows = split.rows.select([f.name for f in stored.fields]).sort_by([(k, "ascending") for k in keys])
    if any(rows.column(name).null_count for name in required):
        return None
    if not all(_in_range(rows.column(name)) for name in ranged):
        return None
    described = batch_df.select(*[quoted(f.name) for f in stored.fields])
    return ChangeBatch(described, collected=replace(split, rows=rows))


def _in_range(column: pa.ChunkedArray) -> bool:
    """Whether every date or timestamp of ``column`` is within the range the sink writes."""
    bounds = arrow_range(column.type)
    return bounds is not None and in_arrow_range(column, *bounds)  # other types: the Spark path checks them
