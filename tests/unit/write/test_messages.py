from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as s

from icesink.write.messages import (
    DataFileMessage,
    RowCounts,
    TaskReport,
    WriteResult,
    messages_to_arrow,
    string_array,
)

partition_values = s.one_of(
    s.none(),
    s.integers(-(2**63), 2**63 - 1),
    s.text(),
    s.binary(),
    s.booleans(),
    s.decimals(allow_nan=False, allow_infinity=False, places=3),
    s.floats(allow_nan=False),
)
counts = s.dictionaries(s.integers(1, 10_000), s.integers(0, 2**40), max_size=5)
bounds = s.dictionaries(s.integers(1, 10_000), s.binary(max_size=20), max_size=5)


@given(
    partition=s.lists(partition_values, max_size=4).map(tuple),
    sizes=counts,
    lower=bounds,
    upper=bounds,
    offsets=s.lists(s.integers(4, 2**40), max_size=4).map(tuple),
)
def test_json_round_trip(partition, sizes, lower, upper, offsets) -> None:
    message = DataFileMessage(
        path="s3://bucket/t/data/x=1/f.parquet",
        partition=partition,
        spec_id=0,
        record_count=10,
        file_size_bytes=1234,
        column_sizes=sizes,
        value_counts=sizes,
        null_value_counts=sizes,
        nan_value_counts={},
        lower_bounds=lower,
        upper_bounds=upper,
        split_offsets=offsets,
        task_id=3,
        entry_layout="ab12",
        entry_block=bytes(range(256)),
    )
    decoded = DataFileMessage.from_json(message.to_json())
    assert decoded == message
    assert all(type(a) is type(b) for a, b in zip(decoded.partition, message.partition, strict=True))


def test_arrow_batch_has_one_row_per_file_then_the_task_report() -> None:
    m = DataFileMessage(path="p", partition=(Decimal("1.50"),), spec_id=0, record_count=1, file_size_bytes=1)
    batch = messages_to_arrow([m, m], TaskReport(task_id=3, input_rows=5, bad_rows=2))
    assert batch.num_rows == 3
    assert DataFileMessage.from_json(batch.column(0)[0].as_py()) == m


def test_write_result_sums_the_reports_of_every_task() -> None:
    m = DataFileMessage(path="p", partition=(), spec_id=0, record_count=3, file_size_bytes=1)
    first = messages_to_arrow([m], TaskReport(0, input_rows=5, bad_rows=2))
    empty = messages_to_arrow([], TaskReport(1, input_rows=4, bad_rows=4))  # every row bad: no file
    texts = first.column(0).to_pylist() + empty.column(0).to_pylist()
    result = WriteResult.from_json(texts)
    assert result == WriteResult([m], RowCounts(input_rows=9, bad_rows=6))
    assert result.source_partitions == frozenset()  # the tasks were not told


def test_write_result_joins_the_spark_partitions_the_tasks_saw() -> None:
    def sources(*reports: TaskReport) -> frozenset[int]:
        texts = [t for r in reports for t in messages_to_arrow([], r).column(0).to_pylist()]
        return WriteResult.from_json(texts).source_partitions

    assert sources(TaskReport(0, 5, 0, (3,)), TaskReport(1, 4, 0, (3,)), TaskReport(2, 0, 0)) == {3}
    assert sources(TaskReport(0, 5, 0, (3,)), TaskReport(1, 4, 0, (0, 1))) == {0, 1, 3}


def test_write_result_keeps_the_widest_rows_any_task_received() -> None:
    widths = [TaskReport(0, 5, 0, input_row_bytes=120), TaskReport(1, 4, 0, input_row_bytes=310)]
    reports = [*widths, TaskReport(2, 0, 0)]
    texts = [messages_to_arrow([], r).column(0)[0].as_py() for r in reports]
    assert WriteResult.from_json(texts).input_row_bytes == 310
    assert WriteResult.from_json(texts[2:]).input_row_bytes == 0  # a task without rows measured nothing


@settings(deadline=None)  # the first pa.array() below imports pandas
@given(s.lists(s.text()))
def test_string_array_built_from_buffers_equals_pyarrows_own(texts: list[str]) -> None:
    array = string_array(texts)
    array.validate(full=True)
    assert array.equals(pa.array(texts, pa.string()))
