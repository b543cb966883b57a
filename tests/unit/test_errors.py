from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from icesink.errors import CommitConflictError, SchemaError, SinkError, WriteError, find_error_code
from icesink.jobs.kafka.source.kafka_errors import KafkaDataLossError


def test_message_has_code_context_and_hint() -> None:
    error = SchemaError("column 'x' is a map", table="db.t", batch_id=3, hint="cast it")
    text = str(error)
    assert text.startswith("ICESINK-SCHEMA: column 'x' is a map")
    assert "table=db.t" in text and "batch_id=3" in text and text.endswith("hint: cast it")
    assert error.context == {"table": "db.t", "batch_id": 3}


def test_codes_are_recognised_in_executor_tracebacks() -> None:
    traceback = "py4j...PythonException:\n  File x\nsink.errors.WriteError: " + str(WriteError("disk full"))
    assert find_error_code(traceback) is WriteError
    assert find_error_code("ICESINK-COMMIT-CONFLICT: lost") is CommitConflictError
    assert find_error_code(str(KafkaDataLossError("gone"))) is KafkaDataLossError
    assert find_error_code("plain RuntimeError") is None


def test_retryable_flags() -> None:
    assert CommitConflictError.retryable and WriteError.retryable
    assert not SchemaError.retryable and not SinkError.retryable


def _every_error_class() -> list[type[SinkError]]:
    found: list[type[SinkError]] = [SinkError]
    for cls in found:
        found.extend(c for c in cls.__subclasses__() if c not in found)
    return found


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__name__)
def test_every_error_survives_three_pickle_round_trips(cls: type[SinkError]) -> None:
    original = cls("value 'x' failed", hint="fix the value", table="db.t", batch_id=7, path="/d/f.parquet")
    copy = original
    for _ in range(3):
        copy = pickle.loads(pickle.dumps(copy))
        assert type(copy) is cls
        assert str(copy) == str(original)
        assert str(copy).count(f"ICESINK-{cls.code}:") == 1
        assert (copy.message, copy.hint, copy.context) == (original.message, original.hint, original.context)
        assert copy.retryable is original.retryable
        assert copy.args == original.args
        assert find_error_code(str(copy)) is cls


def test_attributes_set_after_construction_survive_pickling() -> None:
    error = WriteError("disk full")
    error.files = ["a.parquet"]  # type: ignore[attr-defined]
    copy = pickle.loads(pickle.dumps(error))
    assert copy.files == ["a.parquet"]
    assert str(copy) == str(error)


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda c: c.__name__)
def test_errors_raised_in_an_executor_are_recognised_on_the_driver(spark: Any, cls: type[SinkError]) -> None:
    """An error raised inside a Spark task reaches the driver as text in a Python traceback."""

    def fail(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            raise cls("task failed", hint="retry", table="db.t", batch_id=1)
        yield from ()

    with pytest.raises(Exception) as info:
        spark.range(1, numPartitions=1).mapInArrow(fail, "id long").collect()
    assert not isinstance(info.value, SinkError)  # what the driver gets is Spark's error
    assert find_error_code(str(info.value)) is cls
