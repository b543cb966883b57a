"""Which columns the data files dictionary-encode (``icesink/write/dictionary.py``), checked
against the sizes Parquet itself writes, and through a write task's files."""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write.dictionary import (
    DICTIONARY_PAGE_BYTES,
    MIN_SAMPLE_ROWS,
    SAMPLE_ROWS,
    SAMPLE_VALUES,
    DictionaryColumns,
    dictionary_pays,
    leaf_paths,
)
from icesink.write.task import DataTaskWriter
from tests.unit.writer_fixtures import task_spec

RNG = np.random.default_rng(5)
N = SAMPLE_ROWS
START = dt.datetime(2026, 1, 1)

COLUMNS = {
    "unique longs": pa.array(RNG.permutation(N).astype(np.int64) * 7919),
    "unique timestamps": pa.array(
        [START + dt.timedelta(microseconds=int(x)) for x in RNG.integers(0, 10**11, N)], pa.timestamp("us")
    ),
    "unique strings": pa.array([f"session-{x:012d}" for x in RNG.permutation(N)]),
    "12 ints": pa.array(RNG.integers(0, 12, N).astype(np.int32)),
    "300 longs": pa.array(RNG.integers(0, 300, N).astype(np.int64)),
    "2,000 doubles": pa.array(RNG.integers(0, 2_000, N) / 100.0),
    "5 strings": pa.array([f"kind-{x}" for x in RNG.integers(0, 5, N)]),
    "unique decimal(12, 2)": pa.array(
        [Decimal(int(x)) / 100 for x in RNG.permutation(N)], pa.decimal128(12, 2)
    ),
    "unique decimal(38, 10)": pa.array(
        [Decimal(int(x)) / 10**10 for x in RNG.permutation(N)], pa.decimal128(38, 10)
    ),
    "40 decimal(5, 1)": pa.array([Decimal(int(x)) / 10 for x in RNG.integers(0, 40, N)], pa.decimal128(5, 1)),
    "900 strings, half null": pa.array(
        [None if x % 2 else f"city-{x % 900:04d}-with-a-long-name" for x in RNG.integers(0, 10**6, N)]
    ),
    # 2,000 values of 2 KB: far smaller with a dictionary over 20,000 rows, but their first
    # megabyte is all distinct, so Arrow (as parquet-java) gives the dictionary up and
    # writes the rest plain, after a dictionary page that only adds bytes.
    "2,000 strings of 2 KB": pa.array([f"{x:04d}".ljust(2048, "x") for x in np.arange(N) % 2_000]),
    "8 strings of 2 KB": pa.array([f"{x:04d}".ljust(2048, "x") for x in RNG.integers(0, 8, N)]),
}


def _uncompressed_chunk_bytes(values: pa.Array, use_dictionary: bool) -> int:
    """The column chunk's size as Parquet writes it, without compression."""
    buffer = io.BytesIO()
    pq.write_table(
        pa.table({"c": values}),
        buffer,
        compression="none",
        use_dictionary=use_dictionary,
        store_decimal_as_integer=True,  # as the data files are written
    )
    return int(pq.read_metadata(io.BytesIO(buffer.getvalue())).row_group(0).column(0).total_uncompressed_size)


@pytest.mark.parametrize("name", COLUMNS)
def test_the_choice_is_the_smaller_encoding_as_parquet_writes_it(name: str) -> None:
    values = COLUMNS[name]
    smaller_with_dictionary = _uncompressed_chunk_bytes(values, True) < _uncompressed_chunk_bytes(
        values, False
    )
    assert dictionary_pays(values) == smaller_with_dictionary


def test_the_columns_exercise_both_answers() -> None:
    answers = {name: dictionary_pays(values) for name, values in COLUMNS.items()}
    assert [name for name, pays in answers.items() if not pays] == [
        "unique longs",
        "unique timestamps",
        "unique strings",
        "unique decimal(12, 2)",
        "unique decimal(38, 10)",
        "2,000 strings of 2 KB",
    ]


def test_long_values_are_judged_on_the_bytes_a_dictionary_page_holds() -> None:
    """Only a column's first megabyte of long values is hashed, however many rows follow."""
    values = COLUMNS["2,000 strings of 2 KB"]
    assert len(pc.unique(values)) * 2048 < values.nbytes / 5  # over every row a dictionary would pay
    first_page = values[: DICTIONARY_PAGE_BYTES // 2048 + 1]
    assert dictionary_pays(values) is dictionary_pays(first_page) is False
    assert dictionary_pays(pa.array(values[:100].to_pylist() * 200))  # 100 values repeated: it pays


@pytest.mark.parametrize(
    "values",
    [
        pa.array([True, False] * 1000),
        pa.array([None] * 2000, pa.int64()),
        pa.array([[i] for i in range(2000)]),
    ],
    ids=["booleans", "all null", "lists"],
)
def test_types_the_test_does_not_size_keep_their_dictionary(values: pa.Array) -> None:
    assert dictionary_pays(values)


def _sample_batch(rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "id": COLUMNS["unique longs"][:rows],
            "kind": COLUMNS["5 strings"][:rows],
            "point": pa.StructArray.from_arrays(
                [COLUMNS["unique longs"][:rows], COLUMNS["12 ints"][:rows]], names=["x", "y"]
            ),
            "tags": pa.array([["a", "b"]] * rows),
        }
    )


def test_a_sample_below_the_minimum_decides_nothing() -> None:
    columns = DictionaryColumns(_sample_batch(1).schema)
    columns.sample(_sample_batch(MIN_SAMPLE_ROWS - 1))
    assert columns.use_dictionary is True and columns.plain_columns is None


def test_the_first_sample_decides_with_nested_columns_named_as_parquet_names_them() -> None:
    batch = _sample_batch(5_000)
    columns = DictionaryColumns(batch.schema)
    columns.sample(batch)
    assert columns.plain_columns == ("id",)
    assert columns.use_dictionary == ["kind", "point.x", "point.y", "tags.list.element"]
    columns.sample(pa.RecordBatch.from_pydict({k: [v[0]] * 5_000 for k, v in batch.to_pydict().items()}))
    assert columns.plain_columns == ("id",)  # the first sample's choice stays

    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_batches([batch]), buffer, use_dictionary=columns.use_dictionary)
    chunks = pq.read_metadata(io.BytesIO(buffer.getvalue())).row_group(0)
    with_dictionary = {
        chunks.column(i).path_in_schema: chunks.column(i).has_dictionary_page for i in range(5)
    }
    assert with_dictionary == {
        "id": False,
        "kind": True,
        "point.x": True,  # nested columns keep their dictionary, whatever their values
        "point.y": True,
        "tags.list.element": True,
    }


def test_leaf_paths_follow_the_fields_order_and_names_with_dots() -> None:
    schema = pa.schema(
        [
            pa.field("a.b", pa.int64()),
            pa.field("m", pa.map_(pa.string(), pa.struct([("p", pa.int32()), ("q", pa.string())]))),
            pa.field("z", pa.string()),
        ]
    )
    assert leaf_paths(schema) == [
        ["a.b"],
        ["m.key_value.key", "m.key_value.value.p", "m.key_value.value.q"],
        ["z"],
    ]


SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "kind", StringType(), required=False),
    NestedField(3, "at", TimestampType(), required=False),
)


def test_a_write_task_files_keep_the_dictionary_only_where_it_pays(tmp_path: Path) -> None:
    spec = task_spec(tmp_path / "data", "db.t", SCHEMA, PartitionSpec(), "sink-b1-a")
    rows = 30_000
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(RNG.permutation(rows).astype(np.int64)),
            pa.array([f"kind-{x}" for x in RNG.integers(0, 5, rows)]),
            pa.array(
                [START + dt.timedelta(seconds=int(x)) for x in RNG.permutation(rows)], pa.timestamp("us")
            ),
        ],
        schema=iceberg_to_arrow_schema(SCHEMA),
    )
    messages = DataTaskWriter(spec, task_id=0, attempt=0).write_all(
        iter(batch.slice(i, 5_000) for i in range(0, rows, 5_000))
    )

    assert len(messages) == 1
    path = messages[0].path.removeprefix("file://")
    chunks = pq.read_metadata(path).row_group(0)
    assert {chunks.column(i).path_in_schema: chunks.column(i).has_dictionary_page for i in range(3)} == {
        "id": False,
        "kind": True,
        "at": False,
    }
    table = pq.read_table(path)
    assert table.column("id").to_pylist() == batch.column(0).to_pylist()
    assert table.column("at").to_pylist() == batch.column(2).to_pylist()
    assert messages[0].record_count == rows


def test_a_wide_table_samples_fewer_rows() -> None:
    """The test looks at about as many values however wide the table: a column that turns
    unique after the first rows decides otherwise in a wide table than in a narrow one."""
    # The first 10,000 rows: 7,000 values (a dictionary pays); all 20,000: 17,000 (it does not).
    late = pa.array(np.concatenate([np.arange(10_000) % 7_000, 100_000 + np.arange(10_000)]).astype(np.int64))

    def choice(columns: int) -> tuple[str, ...] | None:
        fill = pa.array(np.zeros(SAMPLE_ROWS, dtype=np.int64))
        batch = pa.RecordBatch.from_arrays([late] + [fill] * (columns - 1), [f"c{i}" for i in range(columns)])
        chooser = DictionaryColumns(batch.schema)
        chooser.sample(batch)
        return chooser.plain_columns

    assert SAMPLE_VALUES // 128 == 10_000
    assert choice(64) == ("c0",)  # 20,000 rows sampled
    assert choice(128) == ()  # 10,000 rows sampled
