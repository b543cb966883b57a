"""Failpoints fire only when armed, as often as armed, and reach write tasks through a picklable map."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from icesink import failpoints


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    failpoints.disarm_all()
    yield
    failpoints.disarm_all()


def test_a_disarmed_point_does_nothing() -> None:
    for point in failpoints.POINTS:
        failpoints.hit(point)


def test_an_armed_point_fires_as_often_as_armed() -> None:
    failpoints.arm("stage", times=2)
    for _ in range(2):
        with pytest.raises(failpoints.InjectedFault, match="failpoint stage fired"):
            failpoints.hit("stage")
    failpoints.hit("stage")  # disarmed after its second hit


def test_a_callable_runs_at_its_point() -> None:
    seen: list[str] = []
    failpoints.arm("commit.before", "call", call=seen.append)
    failpoints.hit("route")
    failpoints.hit("commit.before")
    assert seen == ["commit.before"]


def test_unknown_points_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown failpoint"):
        failpoints.arm("comit.before")


def test_executor_points_go_to_the_tasks_once() -> None:
    failpoints.arm("write.task", "exit")
    failpoints.arm("stage")
    handed = pickle.loads(pickle.dumps(failpoints.for_tasks()))
    assert handed == {"write.task": ("exit", 1)}
    assert failpoints.for_tasks() == {}  # handed over: the next write has none
    failpoints.arm("storage.write")
    handed = pickle.loads(pickle.dumps(failpoints.for_tasks()))
    with failpoints.armed_in_task(handed), pytest.raises(failpoints.InjectedFault):
        failpoints.hit("storage.write")
    failpoints.hit("storage.write")
    with pytest.raises(failpoints.InjectedFault):
        failpoints.hit("stage")  # the driver's own points stay armed


def test_the_environment_arms_a_process() -> None:
    code = "from icesink import failpoints; failpoints.hit('route'); failpoints.hit('commit.after')"
    env = {**os.environ, failpoints.ENV_VAR: "commit.after=exit"}
    done = subprocess.run([sys.executable, "-c", code], env=env, check=False)
    assert done.returncode == 137
    env[failpoints.ENV_VAR] = "commit.after=explode"
    command = [sys.executable, "-c", code]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    assert "is not point=raise or point=exit" in refused.stderr


def test_a_point_hit_from_many_threads_at_once_fires_exactly_its_armed_hits() -> None:
    fired: list[str] = []
    failpoints.arm("commit.before", "call", times=500, call=fired.append)
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can: the race shows if there is one
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: _hit_many("commit.before", 200), range(8)))
    finally:
        sys.setswitchinterval(before)
        failpoints.disarm_all()
    assert len(fired) == 500


def _hit_many(point: str, times: int) -> None:
    for _ in range(times):
        failpoints.hit(point)
