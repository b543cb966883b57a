"""Fixtures of the integration tests: a real Kafka-protocol broker (Tansu) on 127.0.0.1."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from tests.support.tansu import TansuBroker


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    """One Tansu broker for the test session, stopped at its end."""
    with TansuBroker(log_dir=tmp_path_factory.mktemp("tansu")) as broker:
        yield broker


@pytest.fixture()
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (the broker is shared by the session)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
