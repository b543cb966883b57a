"""librdkafka's log lines through ClientLog: each kind (client, facility) at most once per interval."""

from __future__ import annotations

import logging

import pytest

from icesink.jobs.kafka.source.kafka_client_log import ClientLog

FMT = "%s [%s] %s"  # how confluent-kafka hands a librdkafka line to a logger


def test_repeated_lines_are_held_back_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    log = ClientLog(interval_s=30.0, clock=lambda: now[0])
    with caplog.at_level(logging.DEBUG, logger="icesink.jobs.kafka.source.client"):
        for i in range(100):  # 17 a second, as librdkafka retries a refused connection
            now[0] = i / 17
            log.log(logging.ERROR, FMT, "FAIL", "admin#producer-1", f"Connect failed (after {i}ms)")
        log.log(logging.WARNING, FMT, "REQTMOUT", "admin#producer-1", "request timed out")  # another kind
        now[0] = 31.0
        log.log(logging.ERROR, FMT, "FAIL", "admin#producer-1", "Connect failed (after 0ms)")
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert lines == [
        (logging.ERROR, "FAIL [admin#producer-1] Connect failed (after 0ms)"),
        (logging.WARNING, "REQTMOUT [admin#producer-1] request timed out"),
        (
            logging.ERROR,
            "FAIL [admin#producer-1] Connect failed (after 0ms) (99 more like it since the last one shown)",
        ),
    ]
