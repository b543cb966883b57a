"""The driver's offset queries give up by ``brokerTimeoutMs``: their attempts share it, pauses included.

A real admin client against a port where no broker listens; the test records the timeout
each attempt is given and the pauses between them, and checks their sum against the
budget instead of timing the call (about 3 s). The reader's clock is one the test moves by
exactly those timeouts and pauses, so a loaded machine cannot change the attempts.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace
from typing import Any

import pytest

from icesink.jobs.kafka.source import kafka_offset_reader
from icesink.jobs.kafka.source.kafka_errors import KafkaSourceError
from icesink.jobs.kafka.source.kafka_offset_reader import KafkaOffsetReader
from icesink.jobs.kafka.source.kafka_options import DEFAULT_BROKER_TIMEOUT_MS, KafkaSourceOptions


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class RecordingAdmin:
    """The real admin client, noting the timeout of each call and moving the clock by it."""

    def __init__(self, admin: Any, clock: Clock) -> None:
        self.admin = admin
        self.clock = clock
        self.timeouts: list[float] = []

    def list_topics(self, timeout: float) -> Any:
        self.timeouts.append(timeout)
        try:
            return self.admin.list_topics(timeout=timeout)
        finally:
            self.clock.now += timeout

    def poll(self, timeout: float) -> int:
        return int(self.admin.poll(timeout))


def test_the_attempts_and_their_pauses_fit_in_the_broker_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    assert DEFAULT_BROKER_TIMEOUT_MS == 30_000  # the job's default: reported within a minute
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{s.getsockname()[1]}"
    options = {"kafka.bootstrap.servers": address, "subscribe": "orders", "brokerTimeoutMs": "3000"}
    reader = KafkaOffsetReader(KafkaSourceOptions.from_options(options, "stream"))
    clock = Clock()
    admin = RecordingAdmin(reader._admin_client(), clock)
    reader._admin = admin
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        clock.now += seconds

    # the reader's own clock only: other threads of the test process keep the real one
    monkeypatch.setattr(kafka_offset_reader, "time", SimpleNamespace(monotonic=clock.monotonic, sleep=pause))

    with pytest.raises(KafkaSourceError, match=r"could not list topics after 3 attempts within 3 s") as info:
        reader.topic_partitions()

    assert f"bootstrap_servers={address}" in str(info.value)
    assert len(admin.timeouts) == 3 and len(pauses) == 2  # no pause after the last attempt
    assert sum(admin.timeouts) + sum(pauses) <= 3.0, (admin.timeouts, pauses)
