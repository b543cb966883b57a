"""The deployment tests run on real servers started once per test run (tests/support/server_fixtures.py)."""

from __future__ import annotations

from tests.support.server_fixtures import (
    postgres,
    pytest_terminal_summary,
    seaweedfs,
    spark_cluster,
    spark_connect,
)

__all__ = ["postgres", "pytest_terminal_summary", "seaweedfs", "spark_cluster", "spark_connect"]
