"""Fixtures of the integration tests.

Their Kafka broker is Apache Kafka, one for the whole run: the ``apache_kafka`` fixture of
:mod:`tests.support.server_fixtures`; each test makes topics of its own (``topic_name``).
"""

from __future__ import annotations

import re
import uuid

import pytest


@pytest.fixture()
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test (the broker is shared by the run)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:60].strip("-")
    return f"{base}-{uuid.uuid4().hex[:8]}"
