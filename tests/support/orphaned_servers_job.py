"""Starts servers, says their process ids, and waits to be killed: the kernel must then stop the servers.

Run as a script with the repository on ``PYTHONPATH``; reads ``workdir`` as JSON from
standard input and prints one JSON line once every server is ready: ``pids`` (server
name to process id) and ``leftovers``, folders outside ``workdir`` that only a clean
stop would have removed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.support.postgres import PostgresServer
from tests.support.seaweedfs import SeaweedFS

WAIT_S = 300.0


def main() -> None:
    workdir = Path(json.load(sys.stdin)["workdir"])
    seaweedfs, postgres = SeaweedFS(workdir), PostgresServer(workdir)
    for server in (seaweedfs, postgres):
        server.start()
    pids = {server.name: server.pid for server in (seaweedfs, postgres)}
    print(json.dumps({"pids": pids, "leftovers": [str(postgres.cluster_dir)]}), flush=True)
    time.sleep(WAIT_S)


if __name__ == "__main__":
    main()
