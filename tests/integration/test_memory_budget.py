"""A task with thousands of open partition writers stays inside its memory budget."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from pyiceberg.catalog import load_catalog

from tests.support.tables import data_files

MiB = 1024 * 1024
PARTITIONS = 2000
ROWS = 1_000_000


def test_two_thousand_partition_values_in_one_task(tmp_path: Path) -> None:
    """About 150 MiB of Arrow data through 2000 open writers: without the budget it all
    would be buffered at once. The task runs in a Spark of its own, so the worker's
    peak RSS is this task's, not whatever earlier tests left in a reused worker."""
    budget = 64 * MiB
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", f"file://{tmp_path / 'warehouse'}"
    proc = subprocess.run(
        [
            sys.executable, "-m", "tests.support.fanout_job",
            "--catalog-uri", uri, "--warehouse", warehouse,
            "--rows", str(ROWS), "--partitions", str(PARTITIONS), "--budget-bytes", str(budget),
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    metrics = json.loads(proc.stdout.strip().splitlines()[-1])

    table = load_catalog("test", type="sql", uri=uri, warehouse=warehouse).load_table("db.fanout")
    files = data_files(table)
    assert sum(f.record_count for f in files) == ROWS
    assert len({f.partition[0] for f in files}) == PARTITIONS
    ids = table.scan(selected_fields=("id",)).to_arrow().column("id")
    assert ids.length() == ROWS and len(set(ids.to_pylist())) == ROWS

    assert metrics["open_writers_max"] == PARTITIONS
    assert metrics["buffered_bytes_max"] <= budget * 1.05  # one batch over, at most, before a close
    peak_rss = metrics["task_peak_rss_bytes"]
    assert 0 < peak_rss < budget + 300 * MiB, f"peak RSS {peak_rss / MiB:.0f} MiB"
