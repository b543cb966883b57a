"""One writer of the shared-catalog test, run as a script: appends batches of ids to one table.

Reads its arguments as JSON from standard input (``catalog`` properties, ``table``,
``ids``: a list of lists, one append each), loads the table through the catalog before
every append (as an independent writer would), and prints one JSON line with the
snapshot ids it committed. Concurrent commits are refused by the catalog and retried by
pyiceberg after a refresh.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import load_catalog


def main(arguments: dict[str, Any]) -> dict[str, Any]:
    catalog = load_catalog("shared", **arguments["catalog"])
    snapshots = []
    for ids in arguments["ids"]:
        table = catalog.load_table(arguments["table"])
        batch = pa.table(
            {"id": pa.array(ids, pa.int64()), "writer": pa.array([arguments["writer"]] * len(ids))}
        )
        table.append(batch)
        snapshot = table.current_snapshot()
        assert snapshot is not None
        snapshots.append(snapshot.snapshot_id)
    return {"writer": arguments["writer"], "snapshots": snapshots}


if __name__ == "__main__":
    print(json.dumps(main(json.load(sys.stdin))))
