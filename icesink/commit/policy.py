"""When to commit: every micro-batch, or once enough is staged."""

from __future__ import annotations

import time
from dataclasses import dataclass

from icesink.commit.staging import StagingArea


@dataclass(frozen=True)
class CommitPolicy:
    """Commit cadence.

    With no threshold set, every micro-batch is committed on its own. Otherwise
    batches are staged and committed together once any threshold is reached, or at a
    chunk boundary: an empty micro-batch (the source has caught up), the query going
    idle or stopping, or an explicit :meth:`~icesink.sink.IcebergSink.flush`.

    Attributes:
        target_bytes: Commit once staged data files reach this many bytes.
        interval_s: Commit once the oldest staged batch is this old.
        max_batches: Commit once this many batches are staged.
    """

    target_bytes: int | None = None
    interval_s: float | None = None
    max_batches: int | None = None

    @property
    def stages(self) -> bool:
        """Whether batches may be held for a later commit."""
        return any(v is not None for v in (self.target_bytes, self.interval_s, self.max_batches))

    def due(self, staging: StagingArea, now: float | None = None) -> bool:
        """Whether the staged batches should be committed now."""
        if not staging.batches:
            return False
        if not self.stages:
            return True
        if self.target_bytes is not None and staging.size_bytes >= self.target_bytes:
            return True
        if self.max_batches is not None and len(staging.batches) >= self.max_batches:
            return True
        oldest = staging.oldest_staged_at
        now = time.time() if now is None else now
        return self.interval_s is not None and oldest is not None and now - oldest >= self.interval_s
