"""The executor side of a write (``icesink/write/task.py``), run in process: no Spark needed.

Each test writes real Parquet files into a folder of ``tmp_path`` and reads them back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icesink import failpoints
from icesink.errors import WriteError, find_error_code
from icesink.type_mapping import iceberg_to_arrow_schema
from icesink.write import task_clock
from icesink.write.messages import WriteResult
from icesink.write.spec import WriteSpec
from icesink.write.task import DataTaskWriter, write_function
from tests.unit.writer_fixtures import task_spec

BUCKETS = 4
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "v", StringType(), required=False),
)
SPEC = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=BucketTransform(BUCKETS), name="b"))


def _spec(tmp_path: Path, **changes: object) -> WriteSpec:
    return task_spec(tmp_path / "data", "db.t", SCHEMA, SPEC, "sink-b7-attempt", **changes)


def _rows(ids: range, bad: set[int] | None = None) -> pa.RecordBatch:
    arrays: list[pa.Array] = [pa.array(list(ids), pa.int64()), pa.array([f"v{i}" for i in ids])]
    schema = iceberg_to_arrow_schema(SCHEMA)
    if bad is not None:
        arrays.append(pa.array([i in bad for i in ids]))
        schema = schema.append(pa.field("__bad", pa.bool_()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _bucket(key: int) -> int:
    bucket = BucketTransform(BUCKETS).transform(LongType())(key)
    assert bucket is not None
    return int(bucket)


def _parquet_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "data").rglob("*.parquet"))


def test_each_file_holds_the_rows_of_its_own_bucket(tmp_path: Path) -> None:
    writer = DataTaskWriter(_spec(tmp_path), task_id=3, attempt=1)
    messages = writer.write_all(iter([_rows(range(0, 60)), _rows(range(60, 100))]))

    assert sum(m.record_count for m in messages) == 100
    assert writer.report.input_rows == 100 and writer.report.bad_rows == 0
    assert len(messages) == len({m.partition for m in messages}) == BUCKETS  # one file per bucket here
    seen: list[int] = []
    for message in messages:
        path = Path(message.path.removeprefix("file://"))
        name = path.name
        assert name.startswith("sink-b7-attempt-00003-1-") and name.endswith(".parquet")
        assert path.parent.name == f"b={message.partition[0]}"
        ids = pq.read_table(path).column("id").to_pylist()
        assert {_bucket(i) for i in ids} == {message.partition[0]}
        assert len(ids) == message.record_count and message.file_size_bytes == path.stat().st_size
        seen.extend(ids)
    assert sorted(seen) == list(range(100))
    assert sorted(Path(m.path.removeprefix("file://")) for m in messages) == _parquet_files(tmp_path)


def test_rows_flagged_bad_are_counted_and_not_written(tmp_path: Path) -> None:
    bad = {3, 17, 42, 99}
    writer = DataTaskWriter(_spec(tmp_path, bad_row_flag=True), task_id=0, attempt=0)
    messages = writer.write_all(iter([_rows(range(100), bad)]))

    assert writer.report.input_rows == 100 and writer.report.bad_rows == len(bad)
    written = [i for f in _parquet_files(tmp_path) for i in pq.read_table(f).column("id").to_pylist()]
    assert sorted(written) == sorted(set(range(100)) - bad)
    assert sum(m.record_count for m in messages) == 100 - len(bad)
    assert all("__bad" not in pq.read_schema(f).names for f in _parquet_files(tmp_path))


def test_told_the_key_columns_each_file_sends_its_rows_keys_in_file_order(tmp_path: Path) -> None:
    # Small files and row groups: a bucket's rows roll over several files, each of several row groups.
    sizes = {"target_file_size_bytes": 8192, "row_group_size_bytes": 1024}
    spec = _spec(tmp_path, bad_row_flag=True, key_columns=("id",), **sizes)
    bad = {5, 500, 19999}
    writer = DataTaskWriter(spec, task_id=0, attempt=0)
    messages = writer.write_all(iter([_rows(range(0, 12000), bad), _rows(range(12000, 20000), bad)]))
    wire = WriteResult.from_json(m.to_json() for m in messages).files  # as the driver receives them

    assert len(wire) > BUCKETS  # files rolled
    for message in wire:
        keys = message.key_rows()
        assert keys is not None and keys.column_names == ["id"]
        path = Path(message.path.removeprefix("file://"))
        assert keys.column("id").to_pylist() == pq.read_table(path).column("id").to_pylist()
    sent = [i for m in wire for i in m.key_rows().column("id").to_pylist()]  # type: ignore[union-attr]
    assert sorted(sent) == sorted(set(range(20000)) - bad)  # bad rows are not written: no key sent


def test_without_key_columns_no_keys_are_sent(tmp_path: Path) -> None:
    messages = DataTaskWriter(_spec(tmp_path), task_id=0, attempt=0).write_all(iter([_rows(range(50))]))
    assert messages and all(m.keys == "" and m.key_rows() is None for m in messages)


def _from_partition(batch: pa.RecordBatch, partition: int) -> pa.RecordBatch:
    """``batch`` with the Spark partition its rows came from as its last column."""
    column = pa.array([partition] * batch.num_rows, pa.int32())
    return batch.append_column("__source", column)


def test_the_source_partition_column_is_reported_and_not_written(tmp_path: Path) -> None:
    bad = {3, 77}
    spec = _spec(tmp_path, bad_row_flag=True, source_partition_column=True)
    writer = DataTaskWriter(spec, task_id=0, attempt=0)
    chunks = [_from_partition(_rows(range(0, 50), bad), 2), _from_partition(_rows(range(50, 100), bad), 5)]
    messages = writer.write_all(iter(chunks))

    assert writer.report.source_partitions == (2, 5)
    assert writer.report.input_rows == 100 and writer.report.bad_rows == len(bad)
    written = [i for f in _parquet_files(tmp_path) for i in pq.read_table(f).column("id").to_pylist()]
    assert sorted(written) == sorted(set(range(100)) - bad)
    assert sum(m.record_count for m in messages) == 100 - len(bad)
    assert all(pq.read_schema(f).names == ["id", "v"] for f in _parquet_files(tmp_path))

    one = DataTaskWriter(_spec(tmp_path / "one", source_partition_column=True), task_id=1, attempt=0)
    one.write_all(iter([_from_partition(_rows(range(i, i + 10)), 7) for i in range(0, 40, 10)]))
    assert one.report.source_partitions == (7,)
    empty = DataTaskWriter(_spec(tmp_path / "empty", source_partition_column=True), task_id=2, attempt=0)
    assert empty.write_all(iter([])) == [] and empty.report.source_partitions == ()


def test_a_failing_input_leaves_no_file_and_names_the_task(tmp_path: Path) -> None:
    def batches() -> Iterator[pa.RecordBatch]:
        for start in range(0, 400, 50):
            yield _rows(range(start, start + 50))
        raise RuntimeError("the input broke")

    # A tiny target rolls files while the input still arrives: finished files exist before the error.
    writer = DataTaskWriter(_spec(tmp_path, target_file_size_bytes=1, row_group_size_bytes=1), 5, 0)
    with pytest.raises(WriteError) as raised:
        writer.write_all(batches())

    assert find_error_code(str(raised.value)) is WriteError
    assert "the input broke" in str(raised.value) and raised.value.context["task"] == 5
    assert _parquet_files(tmp_path) == []


def test_the_task_function_times_its_input_and_the_close_of_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The task's clock reads a counter that only the input and the storage move: each phase's
    # seconds are then exactly what happened in it, whatever the machine's speed.
    now = [100.0]
    lock = threading.Lock()
    events: list[str] = []

    def advance(seconds: float, event: str) -> None:
        with lock:
            now[0] += seconds
            events.append(event)

    monkeypatch.setattr(task_clock, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def slow_input() -> Iterator[pa.RecordBatch]:
        yield _rows(range(0, 50))
        advance(3.0, "input")  # Spark's side of the task is slow to hand over the rest
        yield _rows(range(50, 100))
        events.append("input ended")  # the task asked for more, and there was none

    # Each file is opened when the writers are closed, after the input.
    failpoints.arm("storage.write", "call", times=1_000, call=lambda point: advance(2.0, "file opened"))
    try:
        output = list(write_function(_spec(tmp_path))(slow_input()))
    finally:
        failpoints.disarm_all()

    files = WriteResult.from_json(t for b in output for t in b.column(0).to_pylist()).files
    assert len(files) == BUCKETS and len({(f.task_input_seconds, f.task_close_seconds) for f in files}) == 1
    assert events.index("input ended") < events.index("file opened")
    assert files[0].task_input_seconds == 3.0
    assert files[0].task_close_seconds == 2.0 * BUCKETS


def test_the_task_function_yields_its_files_then_its_report(tmp_path: Path) -> None:
    run = write_function(_spec(tmp_path, bad_row_flag=True))
    output = list(run(iter([_rows(range(30), {0, 1})])))

    texts = [t for batch in output for t in batch.column(0).to_pylist()]
    result = WriteResult.from_json(texts)
    assert result.counts.input_rows == 30 and result.counts.bad_rows == 2
    assert sum(f.record_count for f in result.files) == 28
    assert {Path(f.path.removeprefix("file://")) for f in result.files} == set(_parquet_files(tmp_path))


MANY_VALUES = 200  # each value's writer holds a batch: together more than the budget below


def _many_values_input(batches: int, pulled: list[int]) -> Iterator[pa.RecordBatch]:
    """``batches`` of 250 rows: row ``i`` has ``id`` ``i % MANY_VALUES`` and ``v`` ``str(i)``."""
    for k in range(batches):
        pulled.append(k)
        rows = range(k * 250, (k + 1) * 250)
        arrays = [pa.array([i % MANY_VALUES for i in rows], pa.int64()), pa.array([str(i) for i in rows])]
        yield pa.RecordBatch.from_arrays(arrays, schema=iceberg_to_arrow_schema(SCHEMA))


def _by_id_spec(tmp_path: Path) -> WriteSpec:
    by_id = PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="id")
    )
    return task_spec(
        tmp_path / "data", "db.t", SCHEMA, by_id, "sink-b8-attempt", memory_budget_bytes=128 << 10
    )


def test_a_task_closing_many_files_sends_their_messages_on_before_its_input_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("icesink.write.task_fanout.MESSAGES_PER_YIELD", 32)
    pulled: list[int] = []
    outputs: list[tuple[int, pa.RecordBatch]] = []
    with caplog.at_level("WARNING", logger="icesink.write.task_fanout"):
        for batch in write_function(_by_id_spec(tmp_path))(_many_values_input(8, pulled)):
            outputs.append((len(pulled), batch))

    assert any(seen < 8 for seen, _ in outputs)
    assert all(batch.num_rows <= 32 for _, batch in outputs)  # what one output holds is bounded
    texts = [t for _, batch in outputs for t in batch.column(0).to_pylist()]
    assert texts[-1].startswith('{"task_report"')  # the report comes last, once
    result = WriteResult.from_json(texts)
    assert result.counts.input_rows == 2000
    paths = [Path(f.path.removeprefix("file://")) for f in result.files]
    assert len(paths) == len(set(paths)) and set(paths) == set(_parquet_files(tmp_path))
    rows = sorted(int(v) for p in paths for v in pq.read_table(p).column("v").to_pylist())
    assert rows == list(range(2000))
    assert all(f.entry_block for f in result.files)  # sent early or late, each with its entry
    warning = next(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "write.fanout.memory-budget-bytes is too small" in warning and "write.distribution-mode" in warning


def test_a_failed_task_deletes_the_files_it_already_sent_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("icesink.write.task_fanout.MESSAGES_PER_YIELD", 32)
    pulled: list[int] = []

    def breaking() -> Iterator[pa.RecordBatch]:
        yield from _many_values_input(6, pulled)
        raise OSError("the input broke")

    sent: list[pa.RecordBatch] = []
    with pytest.raises(WriteError, match="the input broke"):
        for batch in write_function(_by_id_spec(tmp_path))(breaking()):
            sent.append(batch)
    assert sent  # messages had gone on: Spark drops a failed attempt's output
    assert _parquet_files(tmp_path) == []
