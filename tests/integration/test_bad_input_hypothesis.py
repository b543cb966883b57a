"""Rows of mixed and wrong types never crash the sink and never lose a row.

Hypothesis picks, per column, the type the batch sends (the table's, a wider or
narrower one, a string, something incompatible) and a small palette of values for it
(valid, unparsable, extreme, null); a few hundred rows are then drawn from the
palettes. Every row carries a unique ``rid``, so each one is found again: in the table
or in the dead-letter table (inside its original JSON), never both, never neither.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as hs
from pyspark.sql import SparkSession
from pyspark.sql import types as st

from icesink import IcebergSink

ROWS_PER_EXAMPLE = 400
TABLE = st.StructType(
    [
        st.StructField("rid", st.LongType(), False),
        st.StructField("i", st.IntegerType()),
        st.StructField("x", st.DoubleType()),
        st.StructField("dec", st.DecimalType(8, 2)),
        st.StructField("flag", st.BooleanType()),
        st.StructField("day", st.DateType()),
        st.StructField("ts", st.TimestampType()),
        st.StructField("s", st.StringType(), False),
        st.StructField(
            "nested",
            st.StructType([st.StructField("a", st.IntegerType()), st.StructField("b", st.StringType())]),
        ),
        st.StructField("tags", st.ArrayType(st.IntegerType())),
    ]
)

_TEXT = hs.text(alphabet=hs.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_NUMBER_TEXT = hs.one_of(
    hs.integers(-(2**70), 2**70).map(str),
    hs.floats(allow_nan=True, allow_infinity=True).map(repr),
    hs.decimals(places=3, allow_nan=False, allow_infinity=False, min_value=-(10**9), max_value=10**9).map(
        str
    ),
    hs.sampled_from([" 12 ", "1e3", "0x10", "--1", "1,5", "", "1e400", "-1e400", "Infinity", "NaN"]),
)
_DATE_TEXT = hs.one_of(
    hs.dates().map(dt.date.isoformat),
    hs.datetimes(timezones=hs.just(dt.UTC)).map(dt.datetime.isoformat),
    hs.sampled_from(["2024-02-30", "noon", "2024-13-01T00:00:00", "1970-01-01"]),
)

# For each type a batch may send: (Spark type, strategy of its values; None is always possible).
SCALARS: dict[str, tuple[st.DataType, hs.SearchStrategy[Any]]] = {
    "int": (st.IntegerType(), hs.integers(-(2**31), 2**31 - 1)),
    "long": (st.LongType(), hs.integers(-(2**63), 2**63 - 1)),
    "double": (st.DoubleType(), hs.floats(allow_nan=True, allow_infinity=True)),
    "float": (st.FloatType(), hs.floats(width=32, allow_nan=True, allow_infinity=True)),
    "decimal": (
        st.DecimalType(12, 4),
        hs.decimals(places=4, min_value=-(10**7), max_value=10**7, allow_nan=False),
    ),
    "boolean": (st.BooleanType(), hs.booleans()),
    "date": (st.DateType(), hs.dates()),
    "timestamp": (st.TimestampType(), hs.datetimes(timezones=hs.just(dt.UTC))),
    "string": (
        st.StringType(),
        hs.one_of(_NUMBER_TEXT, _DATE_TEXT, _TEXT, hs.sampled_from(["true", "no", "t"])),
    ),
}
CHOICES: dict[str, list[str]] = {
    "i": ["int", "long", "string", "double", "boolean"],
    "x": ["double", "float", "long", "string", "decimal"],
    "dec": ["decimal", "double", "string", "int"],
    "flag": ["boolean", "string", "int"],
    "day": ["date", "string", "timestamp"],
    "ts": ["timestamp", "string", "date", "long"],
    "s": ["string", "int", "double"],
}


@hs.composite
def batches(draw: hs.DrawFn) -> tuple[st.StructType, list[tuple[Any, ...]]]:
    """A batch schema and rows: per column a type and a palette; rows drawn from the palettes."""
    fields = [st.StructField("rid", st.LongType(), False)]
    palettes: list[list[Any]] = []
    for name, choices in CHOICES.items():
        spark_type, values = SCALARS[draw(hs.sampled_from(choices), label=name)]
        fields.append(st.StructField(name, spark_type))
        palettes.append(draw(hs.lists(hs.one_of(hs.none(), values), min_size=1, max_size=6)))
    nested_kind = draw(hs.sampled_from(["as_table", "swapped_strings", "wider", "string", "missing"]))
    if nested_kind != "missing":
        nested_type, nested_values = _nested(nested_kind)
        fields.append(st.StructField("nested", nested_type))
        palettes.append(draw(hs.lists(hs.one_of(hs.none(), nested_values), min_size=1, max_size=4)))
    element = draw(hs.sampled_from(["int", "long", "string"]))
    element_type, element_values = SCALARS[element]
    fields.append(st.StructField("tags", st.ArrayType(element_type)))
    palettes.append(
        draw(
            hs.lists(
                hs.one_of(hs.none(), hs.lists(hs.one_of(hs.none(), element_values), max_size=3)),
                min_size=1,
                max_size=4,
            )
        )
    )
    if draw(hs.booleans()):  # a column the table does not have yet
        extra = draw(hs.sampled_from(["int", "string", "timestamp", "decimal"]))
        fields.append(st.StructField(f"extra_{extra}", SCALARS[extra][0]))
        palettes.append(draw(hs.lists(hs.one_of(hs.none(), SCALARS[extra][1]), min_size=1, max_size=4)))
    # Each cell is null half of the time (the required "s" rarely), so good and bad rows mix.
    null_odds = [0.02 if f.name == "s" else 0.5 for f in fields[1:]]
    pick = random.Random(draw(hs.integers(0, 2**32)))
    rows = [
        (
            0,
            *(
                None if pick.random() < odds else pick.choice(p)
                for p, odds in zip(palettes, null_odds, strict=True)
            ),
        )
        for _ in range(ROWS_PER_EXAMPLE)
    ]
    return st.StructType(fields), rows


def _nested(kind: str) -> tuple[st.DataType, hs.SearchStrategy[Any]]:
    small = hs.integers(-1000, 1000)
    if kind == "as_table":
        return TABLE["nested"].dataType, hs.tuples(hs.one_of(hs.none(), small), hs.one_of(hs.none(), _TEXT))
    if kind == "swapped_strings":  # fields in another order, the int as text
        t = st.StructType([st.StructField("b", st.StringType()), st.StructField("a", st.StringType())])
        return t, hs.tuples(hs.one_of(hs.none(), _TEXT), hs.one_of(hs.none(), _NUMBER_TEXT))
    if kind == "wider":  # a long field, and a new one
        t = st.StructType(
            [
                st.StructField("a", st.LongType()),
                st.StructField("b", st.StringType()),
                st.StructField("c", st.DoubleType()),
            ]
        )
        return t, hs.tuples(hs.one_of(hs.none(), hs.integers(-(2**40), 2**40)), hs.none(), hs.floats())
    return st.StringType(), _TEXT  # a struct column receiving text: never convertible


@settings(
    max_examples=6,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # shrinking would re-run Spark jobs for minutes
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(batch=batches())
def test_wrong_types_never_crash_and_never_lose_a_row(
    spark: SparkSession, catalog_options: dict[str, str], batch: tuple[st.StructType, list[tuple[Any, ...]]]
) -> None:
    schema, rows = batch
    options = {**catalog_options, "table": "db.chaos", "sink-id": "chaos", "partition-by": "bucket(2, rid)"}
    sink = IcebergSink.from_options(options)
    if not sink.catalog.table_exists("db.chaos"):
        sink.prepare(TABLE)
    batch_id = next(_BATCH_IDS)
    first = batch_id * 10_000
    rids = list(range(first, first + len(rows)))
    df = spark.createDataFrame([(rid, *row[1:]) for rid, row in zip(rids, rows, strict=True)], schema)

    sink(df, batch_id)

    written = [r["rid"] for r in _rows_of_batch(sink, "db.chaos", "rid", first)]
    dead = []
    if sink.catalog.table_exists("db.chaos__dlq"):
        dlq = sink.catalog.load_table("db.chaos__dlq")
        dead = [
            json.loads(r["original_row"])["rid"]
            for r in dlq.scan(row_filter=f"batch_id == {batch_id}").to_arrow().to_pylist()
        ]
    print(f"batch {batch_id} ({schema.simpleString()}): {len(written)} written, {len(dead)} dead-lettered")
    assert len(written) + len(dead) == len(rows)
    assert sorted(written + dead) == rids  # each row exactly once, in one table or the other


_BATCH_IDS = itertools.count()


def _rows_of_batch(sink: IcebergSink, table: str, column: str, first: int) -> list[dict[str, Any]]:
    scan = sink.catalog.load_table(table).scan(
        row_filter=f"{column} >= {first} and {column} < {first + 10_000}", selected_fields=(column,)
    )
    return scan.to_arrow().to_pylist()
