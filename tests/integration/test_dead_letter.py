"""Rows that cannot be converted go to the dead-letter table, once, and the stream goes on."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as st

from icesink import BadRecordError, IcebergSink
from icesink.commit.committer import Committer
from tests.support.tables import table_rows

TYPED = st.StructType(
    [
        st.StructField("id", st.LongType(), False),
        st.StructField("i", st.IntegerType()),
        st.StructField("l", st.LongType()),
        st.StructField("x", st.DoubleType()),
        st.StructField("dec", st.DecimalType(10, 2)),
        st.StructField("flag", st.BooleanType()),
        st.StructField("day", st.DateType()),
        st.StructField("ts", st.TimestampType()),
        st.StructField("name", st.StringType()),
    ]
)
ROWS = 10_000
# Row k is bad when k % 100 == 7: 1 %. Which value is bad cycles through these (column, value, reason).
BAD = [
    ("i", "x12", "parse_error"),
    ("i", "3000000000", "out_of_range"),
    ("l", "1e30", "out_of_range"),
    ("x", "1.2.3", "parse_error"),
    ("dec", "1.234", "precision_loss"),
    ("dec", "123456789012", "out_of_range"),
    ("flag", "maybe", "parse_error"),
    ("day", "2024-13-01", "parse_error"),
    ("ts", "noon", "parse_error"),
    ("id", None, "null_in_required"),
]


def good_row(k: int) -> dict[str, Any]:
    day = dt.date(2024, 1, 1) + dt.timedelta(days=k % 366)
    return {
        "id": k,
        "i": str(k - 5000),
        "l": str(k * 10**10),
        "x": f"{k}.5",
        "dec": f"{k % 1000}.25",
        "flag": "true" if k % 2 else "false",
        "day": day.isoformat(),
        "ts": f"{day.isoformat()}T{k % 24:02d}:{k % 60:02d}:00Z",
        "name": f"n{k}",
    }


def source_rows(
    n: int, offset: int = 0, bad: bool = True
) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Rows as a producer sends them (strings), and for each bad row (by name) its column and reason."""
    rows, expected_bad = [], {}
    for k in range(offset, offset + n):
        row = good_row(k)
        if bad and k % 100 == 7:
            column, value, reason = BAD[(k // 100) % len(BAD)]
            row[column] = value
            expected_bad[row["name"]] = (column, reason)
        rows.append(row)
    return rows, expected_bad


def typed(row: dict[str, Any]) -> dict[str, Any]:
    """A good source row as the table must return it."""
    return {
        "id": row["id"],
        "i": int(row["i"]),
        "l": int(row["l"]),
        "x": float(row["x"]),
        "dec": Decimal(row["dec"]),
        "flag": row["flag"] == "true",
        "day": dt.date.fromisoformat(row["day"]),
        "ts": dt.datetime.fromisoformat(row["ts"].replace("Z", "+00:00")).replace(tzinfo=None),
        "name": row["name"],
    }


def as_sent(spark: SparkSession, rows: list[dict[str, Any]], id_nullable: bool = False) -> DataFrame:
    """Source rows as a DataFrame: ``id`` a long, every other column a string."""
    columns = [st.StructField("id", st.LongType(), id_nullable)]
    columns += [st.StructField(c, st.StringType()) for c in TYPED.names[1:]]
    return spark.createDataFrame([tuple(r.values()) for r in rows], st.StructType(columns))


def typed_sink(catalog_options: dict[str, str], **options: str) -> IcebergSink:
    """A sink whose table was created from :data:`TYPED`."""
    sink = IcebergSink.from_options({**catalog_options, **options})
    sink.prepare(TYPED)
    return sink


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> None:
    schema = pa.schema([("id", pa.int64())] + [(c, pa.string()) for c in list(rows[0])[1:]])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def comparable(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    if isinstance(out.get("ts"), dt.datetime) and out["ts"].tzinfo is not None:
        out["ts"] = out["ts"].astimezone(dt.UTC).replace(tzinfo=None)
    return out


@pytest.mark.parametrize("mode", ["bucket", "none"])
def test_one_percent_bad_values_are_dead_lettered_and_the_stream_goes_on(
    spark: SparkSession, tmp_path: Path, catalog_options: dict[str, str], mode: str
) -> None:
    """The write tasks drop the flagged rows and count them: with a shuffle, and computing keys themselves."""
    options = {
        **catalog_options,
        "table": "db.orders",
        "partition-by": "bucket(4, id)",
        "distribution-mode": mode,
    }
    sink = IcebergSink.from_options(options)
    sink.prepare(TYPED)
    first, expected_bad = source_rows(ROWS)
    second, _ = source_rows(100, offset=ROWS, bad=False)
    (tmp_path / "in").mkdir()
    write_parquet(tmp_path / "in" / "part-0.parquet", first)
    write_parquet(tmp_path / "in" / "part-1.parquet", second)
    for n in (0, 1):  # Spark's file source takes the oldest first: the bad rows are batch 0
        os.utime(tmp_path / "in" / f"part-{n}.parquet", (1_700_000_000 + n, 1_700_000_000 + n))
    schema = spark.read.parquet(str(tmp_path / "in")).schema
    query = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(tmp_path / "in"))
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(600)
    assert query.exception() is None
    assert len(expected_bad) == ROWS // 100

    table_read = [comparable(r) for r in table_rows(sink.catalog.load_table("db.orders"))]
    good = [typed(r) for r in first + second if r["name"] not in expected_bad]
    assert sorted(table_read, key=lambda r: r["name"]) == sorted(good, key=lambda r: r["name"])

    dead = table_rows(sink.catalog.load_table("db.orders__dlq"))
    assert len(dead) + (len(table_read) - len(second)) == ROWS  # every input row accounted for, once
    by_name = {r["name"]: r for r in first}
    assert {json.loads(d["original_row"])["name"]: (d["column"], d["reason"]) for d in dead} == expected_bad
    for d in dead:
        original = json.loads(d["original_row"])
        assert original == by_name[original["name"]]  # the row as it came, nulls included
        column = d["column"]
        assert d["value"] == ("null" if original[column] is None else original[column])
        assert (d["source_table"], d["sink_id"], d["batch_id"]) == ("db.orders", str(query.id), 0)
        assert d["failed_at"] is not None

    metrics = sink.metrics.registry
    labels = {"table": "db.orders", "sink_id": str(query.id)}
    assert metrics.get_sample_value("icesink_dead_letter_rows_total", labels) == ROWS // 100
    for reason in {r for _, _, r in BAD}:
        n = sum(1 for _, r in expected_bad.values() if r == reason)
        assert (
            metrics.get_sample_value(
                "icesink_dead_letter_reasons_total", {"table": "db.orders", "reason": reason}
            )
            == n
        )
    assert metrics.get_sample_value("icesink_rows_written_total", labels) == len(good)


def test_a_batch_of_only_bad_rows_is_all_dead_lettered(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = typed_sink(catalog_options, table="db.all_bad", **{"sink-id": "all-bad", "partition-by": "day"})
    rows, _ = source_rows(3, bad=False)
    for row in rows:
        row["day"] = "someday"
    sink(as_sent(spark, rows), 0)
    assert sink.catalog.load_table("db.all_bad").current_snapshot() is None  # no data file, no commit
    dead = table_rows(sink.catalog.load_table("db.all_bad__dlq"))
    assert sorted((d["column"], d["value"]) for d in dead) == [("day", "someday")] * 3
    labels = {"table": "db.all_bad", "sink_id": "all-bad"}
    assert sink.metrics.registry.get_sample_value("icesink_dead_letter_rows_total", labels) == 3


def test_fail_policy_names_column_value_and_option(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    sink = typed_sink(catalog_options, table="db.strict", **{"sink-id": "strict", "on-bad-record": "fail"})
    rows, _ = source_rows(50, bad=False)
    rows[20]["dec"] = "12,50"
    with pytest.raises(BadRecordError) as info:
        sink(as_sent(spark, rows), 0)
    text = str(info.value)
    assert "'12,50'" in text and "column 'dec'" in text and "on-bad-record=dlq" in text, text
    assert "batch_id=0" in text and "db.strict__dlq" in text
    table = sink.catalog.load_table("db.strict")
    assert table.current_snapshot() is None
    assert not sink.catalog.table_exists("db.strict__dlq")


def test_dead_letters_are_written_once_when_the_batch_is_replayed(
    spark: SparkSession, catalog_options: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {**catalog_options, "table": "db.replayed", "sink-id": "replayed"}
    rows, expected_bad = source_rows(1000)
    df = as_sent(spark, rows, id_nullable=True)
    IcebergSink.from_options(options).prepare(TYPED)

    class Crash(Exception):
        pass

    real_commit = Committer.commit_batches

    def commit(self: Committer, *args: Any, **kwargs: Any) -> Any:
        if self.table.name() == ("db", "replayed"):  # the dead letters are committed; the data is not
            raise Crash("the driver died")
        return real_commit(self, *args, **kwargs)

    monkeypatch.setattr(Committer, "commit_batches", commit)
    with pytest.raises(Crash):
        IcebergSink.from_options(options)(df, 0)
    monkeypatch.setattr(Committer, "commit_batches", real_commit)
    assert len(table_rows(IcebergSink.from_options(options).catalog.load_table("db.replayed__dlq"))) == 10

    restarted = IcebergSink.from_options(options)  # Spark replays batch 0 after the restart
    restarted(df, 0)
    restarted(df, 0)  # and once more, after everything was committed
    table = restarted.catalog.load_table("db.replayed")
    dead = table_rows(restarted.catalog.load_table("db.replayed__dlq"))
    assert len(dead) == len(expected_bad) == 10
    assert sorted(r["name"] for r in table_rows(table)) == sorted(
        r["name"] for r in rows if r["name"] not in expected_bad
    )
    assert len(table.snapshots()) == 1


def test_numbers_beyond_the_range_of_a_double_are_dead_lettered_not_infinite(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    """Spark parses "1e400" as +inf; only an explicit infinity (or NaN) is one, as in Iceberg's own types."""
    sink = IcebergSink.from_options({**catalog_options, "table": "db.floats", "sink-id": "floats"})
    sink.prepare(
        st.StructType([st.StructField("name", st.StringType()), st.StructField("x", st.DoubleType())])
    )
    sink.prepare(
        st.StructType([st.StructField("name", st.StringType()), st.StructField("f", st.FloatType())])
    )
    values = [
        ("x", "1e400", None),
        ("x", "-1e400", None),
        ("x", " 1E+309 ", None),
        ("f", "1e39", None),  # beyond a float
        ("f", "-3.5e38", None),
        ("x", "Infinity", math.inf),
        ("x", "-inf", -math.inf),
        ("x", "+Infinity", math.inf),
        ("f", "-Infinity", -math.inf),
        ("x", "NaN", "NaN"),
        ("x", "1.5e308", 1.5e308),
        ("f", "3.4e38", 3.4e38),
        ("x", "-2.5", -2.5),
    ]
    rows = [(f"r{i}", v if c == "x" else None, v if c == "f" else None) for i, (c, v, _) in enumerate(values)]
    sink(spark.createDataFrame(rows, "name string, x string, f string"), 0)

    stored = {r["name"]: r for r in table_rows(sink.catalog.load_table("db.floats"))}
    dead = {
        json.loads(d["original_row"])["name"]: d
        for d in table_rows(sink.catalog.load_table("db.floats__dlq"))
    }
    for i, (column, text, expected) in enumerate(values):
        name = f"r{i}"
        if expected is None:
            assert name not in stored, (text, stored.get(name))
            assert (dead[name]["column"], dead[name]["reason"], dead[name]["value"]) == (
                column,
                "out_of_range",
                text,
            )
        else:
            assert name not in dead, (text, dead.get(name))
            value = stored[name][column]
            if expected == "NaN":
                assert math.isnan(value)
            else:
                assert value == pytest.approx(expected, rel=1e-6), text
    assert len(stored) + len(dead) == len(values)


def test_a_dead_letter_table_in_a_new_namespace_is_created_with_it(
    spark: SparkSession, catalog_options: dict[str, str]
) -> None:
    options = {"table": "db.routed", "sink-id": "routed", "dead-letter.table": "quarantine.routed_bad"}
    sink = typed_sink(catalog_options, **options)
    rows, _ = source_rows(4, bad=False)
    rows[1]["i"] = "not a number"
    sink(as_sent(spark, rows), 0)
    assert sorted(r["name"] for r in table_rows(sink.catalog.load_table("db.routed"))) == ["n0", "n2", "n3"]
    dead = table_rows(sink.catalog.load_table("quarantine.routed_bad"))
    assert [(d["column"], d["value"], d["reason"]) for d in dead] == [("i", "not a number", "parse_error")]
