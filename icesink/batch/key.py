"""Which attempt of which batch of which sink: the identity every file and record of a batch carries."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

__all__ = ["BatchKey", "new_attempt_id"]


def new_attempt_id() -> str:
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class BatchKey:
    """One attempt of one micro-batch of one sink.

    Attributes:
        sink_id: The sink's identity in every table's ledger (the query id unless ``sink-id`` is set).
        attempt: A batch replayed by Spark is written again as a new attempt, so that two
            attempts' files never share a name.
    """

    sink_id: str
    batch_id: int
    attempt: str

    @classmethod
    def new(cls, sink_id: str, batch_id: int, attempt: str | None = None) -> BatchKey:
        """The key of a new attempt (``attempt``: one planned before the batch, e.g. by its source)."""
        return cls(sink_id, batch_id, attempt or new_attempt_id())

    @property
    def batch_prefix(self) -> str:
        """What the names of every attempt's files of this batch start with."""
        return f"{self.sink_id.replace('-', '')[:12]}-b{self.batch_id}"

    @property
    def file_prefix(self) -> str:
        """What the names of this attempt's files start with (and its folder is called)."""
        return f"{self.batch_prefix}-{self.attempt}"
