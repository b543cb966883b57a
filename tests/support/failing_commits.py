"""A commit that fails part-way through a routed batch: the second commit attempt of the process."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from icesink import failpoints


@contextlib.contextmanager
def second_commit_fails() -> Iterator[None]:
    """Inside the block, the second hit of ``commit.before`` raises ``InjectedFault``; disarmed after."""
    hits: list[str] = []

    def second_fails(point: str) -> None:
        hits.append(point)
        if len(hits) == 2:
            raise failpoints.InjectedFault("the commit of the second table fails")

    failpoints.arm("commit.before", "call", times=2, call=second_fails)
    try:
        yield
    finally:
        failpoints.disarm_all()
