"""Spark's Kafka source in the job: the defaults it gets, and its failures told apart from the sink's."""

from __future__ import annotations

import pytest

from icesink.jobs.kafka.jvm_source import DEFAULT_API_TIMEOUT_MS, jvm_source_options, source_failure

OPTIONS = {"kafka.bootstrap.servers": "10.1.2.3:9092", "subscribe": "orders"}
# The text of the StreamingQueryException of a query whose brokers never answered (Spark 4.2).
UNREACHABLE = (
    "[STREAM_FAILED] Query [id = c17d, runId = 1626] terminated with exception: "
    "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
    "Call: listNodes SQLSTATE: XXKST\n=== Streaming Query ===\nIdentifier: [id = c17d, runId = 1626]\n"
)


def test_offset_requests_wait_less_than_kafkas_minute_unless_set() -> None:
    options = jvm_source_options(OPTIONS)
    assert options["kafka.default.api.timeout.ms"] == str(DEFAULT_API_TIMEOUT_MS)
    assert options["kafka.request.timeout.ms"] == str(DEFAULT_API_TIMEOUT_MS)
    assert 3 * DEFAULT_API_TIMEOUT_MS < 60_000  # Spark tries three times
    mine = {**OPTIONS, "kafka.default.api.timeout.ms": "90000", "kafka.request.timeout.ms": "40000"}
    assert jvm_source_options(mine) == mine


@pytest.mark.parametrize(
    ("given", "api_ms", "request_ms"),
    [
        ({"kafka.default.api.timeout.ms": "2000"}, "2000", "2000"),  # the admin client's 30 s is above it
        ({"kafka.request.timeout.ms": "40000"}, "40000", "40000"),
        ({"kafka.request.timeout.ms": "5000"}, str(DEFAULT_API_TIMEOUT_MS), "5000"),
    ],
)
def test_the_call_timeout_is_never_below_the_request_timeout(
    given: dict[str, str], api_ms: str, request_ms: str
) -> None:
    options = jvm_source_options({**OPTIONS, **given})
    assert (options["kafka.default.api.timeout.ms"], options["kafka.request.timeout.ms"]) == (
        api_ms,
        request_ms,
    )


def test_a_kafka_client_failure_becomes_the_sources_coded_error_naming_the_brokers() -> None:
    error = source_failure(RuntimeError(UNREACHABLE), jvm_source_options(OPTIONS))
    assert error is not None
    text = str(error)
    assert text.startswith(
        "ICESINK-KAFKA-SOURCE: Spark's Kafka source failed on the brokers at 10.1.2.3:9092: "
    )
    assert "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment." in text
    assert "SQLSTATE" not in text and "=== Streaming Query ===" not in text
    assert f"waited {DEFAULT_API_TIMEOUT_MS} ms" in text


def test_a_failure_of_the_sink_is_not_the_sources() -> None:
    sink_failure = "terminated with exception: ICESINK-COMMIT: ... org.apache.kafka.common.errors.X"
    assert source_failure(RuntimeError(sink_failure), OPTIONS) is None
    assert source_failure(RuntimeError("Python worker exited unexpectedly"), OPTIONS) is None
