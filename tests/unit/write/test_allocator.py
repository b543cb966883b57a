"""The Spark setting that starts the Python workers with the write tasks' Arrow pool."""

from __future__ import annotations

import pyarrow as pa
import pytest

from icesink.write.allocator import POOL_ENV, WRITE_POOL, executor_environment


def test_the_workers_start_with_the_write_pool_unless_the_environment_names_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow was built without jemalloc")
    monkeypatch.delenv(POOL_ENV, raising=False)
    assert executor_environment() == {"spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": WRITE_POOL}
    monkeypatch.setenv(POOL_ENV, "system")  # a local application's workers inherit the driver's choice
    assert executor_environment() == {}
