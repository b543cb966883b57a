from __future__ import annotations

from sink.errors import CommitConflictError, SchemaError, SinkError, WriteError, find_error_code
from streaming_jobs.kafka.source.kafka_errors import KafkaDataLossError


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
