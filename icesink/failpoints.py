"""Named failpoints: places in a batch where a test can make the sink fail on purpose.

Every numbered step of a batch calls :func:`hit` with its point's name (see :data:`POINTS`).
Disarmed, a hit is one lookup in an empty dict. A test process arms a point in process
with :func:`arm` (an exception to raise, ``exit`` to end the process at once, or any
callable, e.g. one that takes the catalog down), or for processes it starts through the
``ICESINK_FAILPOINTS`` environment variable (``point=raise`` or ``point=exit``, comma
separated). Write tasks run in other processes: the driver hands them the points armed
for the executor (:func:`for_tasks`, picklable) and the task arms them for its duration
(:func:`armed_in_task`).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

ENV_VAR = "ICESINK_FAILPOINTS"

POINTS = (
    "normalize",  # 1. before the batch is aligned to the table
    "schema",  # 2. before the table is created or evolved for the batch
    "route",  # 3. before the rows are distributed to their write tasks
    "write.task",  # 4. in a write task, after its files are written (executor)
    "storage.write",  # 4. in a write task, as a data file is opened (executor)
    "deadletter",  # 1b. before the dead letters are committed
    "stage",  # 5. before the batch's files are staged
    "commit.before",  # 6. before the data commit is sent
    "commit.lost",  # 6. after the data commit landed: its outcome is lost
    "commit.after",  # 6. after the commit, before foreachBatch returns
    "maintenance",  # maintenance, between finding orphan files and deleting them
    "maintenance.commit",  # maintenance, a compaction's files written, its commit not begun
)
EXECUTOR_POINTS = frozenset({"write.task", "storage.write"})


class InjectedFault(RuntimeError):
    """The failure a ``raise`` failpoint injects (never raised outside tests)."""


@dataclass(frozen=True)
class Action:
    """What an armed point does: ``raise``, ``exit``, or a callable (in process only)."""

    kind: str
    times: int = 1
    call: Callable[[str], None] | None = None

    def fire(self, point: str) -> None:
        if self.call is not None:
            self.call(point)
        elif self.kind == "exit":
            os._exit(137)  # a crash, with no cleanup, is the point
        else:
            raise InjectedFault(f"failpoint {point} fired")


_armed: dict[str, Action] = {}
_lock = threading.Lock()  # points are hit from several threads at once (a routed batch's commits)


def _from_env(value: str) -> dict[str, Action]:
    points: dict[str, Action] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, _, kind = item.partition("=")
        if name not in POINTS or kind not in ("raise", "exit"):
            raise ValueError(f"{ENV_VAR}: {item!r} is not point=raise or point=exit; points: {POINTS}")
        points[name] = Action(kind, times=1_000_000)
    return points


_armed.update(_from_env(os.environ.get(ENV_VAR, "")))


def hit(point: str) -> None:
    """Fire ``point`` if it is armed (a no-op otherwise)."""
    if not _armed:
        return
    with _lock:  # each armed hit is taken by exactly one caller
        action = _armed.get(point)
        if action is None:
            return
        if action.times <= 1:
            del _armed[point]
        else:
            _armed[point] = Action(action.kind, action.times - 1, action.call)
    action.fire(point)


def arm(
    point: str, kind: str = "raise", *, times: int = 1, call: Callable[[str], None] | None = None
) -> None:
    """Arm ``point`` for its next ``times`` hits in this process.

    Raises:
        ValueError: ``point`` is not one of :data:`POINTS`, or ``kind`` is unknown.
    """
    if point not in POINTS or kind not in ("raise", "exit", "call"):
        raise ValueError(f"unknown failpoint {point!r} or action {kind!r}; points: {POINTS}")
    _armed[point] = Action(kind, times, call)


def disarm_all() -> None:
    """Disarm every point of this process."""
    _armed.clear()


def for_tasks() -> Mapping[str, tuple[str, int]]:
    """The executor points armed here, to hand to write tasks (picklable), then disarmed here."""
    handed = {p: (a.kind, a.times) for p, a in _armed.items() if p in EXECUTOR_POINTS and a.call is None}
    for point in handed:
        del _armed[point]
    return handed


@contextlib.contextmanager
def armed_in_task(points: Mapping[str, tuple[str, int]]) -> Iterator[None]:
    """Arm ``points`` (from :func:`for_tasks`) for the duration of one write task."""
    if not points:
        yield
        return
    saved = dict(_armed)
    _armed.update({p: Action(kind, times) for p, (kind, times) in points.items()})
    try:
        yield
    finally:
        _armed.clear()
        _armed.update(saved)
