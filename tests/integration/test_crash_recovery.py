"""SIGKILL around the commit or inside the sink's maintenance, restart from the checkpoint: every row once."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from icesink.maintenance import referenced_files, remove_orphan_files
from tests.support.tables import catalog_from_options

ROOT = Path(__file__).resolve().parents[2]
ROWS_PER_FILE = 2000
FILES = 4


def write_input(folder: Path, files: int = FILES, offset: int = 0) -> set[int]:
    folder.mkdir(parents=True)
    ids: set[int] = set()
    for n in range(files):
        start = offset + n * ROWS_PER_FILE
        batch_ids = list(range(start, start + ROWS_PER_FILE))
        ids.update(batch_ids)
        table = pa.table(
            {
                "id": pa.array(batch_ids, pa.int64()),
                "k": pa.array([i % 7 for i in batch_ids], pa.int32()),
                "ts": pa.array([i * 60_000_000 for i in batch_ids], pa.timestamp("us", tz="UTC")),
            }
        )
        pq.write_table(table, folder / f"part-{n:03d}.parquet")
    return ids


def run_job(*args: str, failpoints: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    if failpoints:
        env["ICESINK_FAILPOINTS"] = failpoints
    return subprocess.run(
        [sys.executable, "-m", "tests.support.stream_job", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def job_arguments(input_folder: Path, checkpoint: Path, options: dict[str, str]) -> list[str]:
    """The arguments of ``tests.support.stream_job`` common to a crashed run and its restart."""
    return ["--input", str(input_folder), "--checkpoint", str(checkpoint), "--options", json.dumps(options)]


def job_result(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    for line in proc.stdout.splitlines():
        if line.startswith("ICESINK_JOB_RESULT "):
            return json.loads(line.removeprefix("ICESINK_JOB_RESULT "))
    raise AssertionError(f"job printed no result; rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}")


def operation(table: Any) -> str:
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return str(snapshot.summary.operation.value)


def parquet_files_on_disk(warehouse: Path) -> set[str]:
    return {f"file://{p}" for p in warehouse.rglob("*.parquet") if "/data/" in str(p)}


# A replay after the commit is also checked in process (tests/faults, the ``commit.after``
# failpoint); its SIGKILL run is in make test-faults.
@pytest.mark.parametrize(
    "crash_at", ["after-write", pytest.param("after-commit", marks=pytest.mark.faults_full)]
)
def test_sigkill_then_restart_gives_every_row_once(
    tmp_path: Path, warehouse: Path, catalog_options: dict[str, str], crash_at: str
) -> None:
    ids = write_input(tmp_path / "input")
    options = {**catalog_options, "table": "db.crash", "partition-by": "bucket(4, id)"}
    common = job_arguments(tmp_path / "input", tmp_path / "ck", options)

    crashed = run_job(*common, "--crash-at", crash_at, "--crash-batch", "1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    table = catalog_from_options(options).load_table("db.crash")
    committed_before = len(table.snapshots())
    assert committed_before == (1 if crash_at == "after-write" else 2)
    if crash_at == "after-write":
        # The crashed attempt's files are on disk but in no snapshot.
        referenced = {task.file.file_path for task in table.scan().plan_files()}
        assert parquet_files_on_disk(warehouse) - referenced

    restarted = run_job(*common)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    result = job_result(restarted)

    table = catalog_from_options(options).load_table("db.crash")
    read_ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(read_ids) == len(ids)
    assert set(read_ids) == ids
    referenced = {task.file.file_path for task in table.scan().plan_files()}
    assert parquet_files_on_disk(warehouse) == referenced, "unreferenced data files left behind"
    if crash_at == "after-write":
        assert result["icesink_orphan_files_total"] >= 1  # reported, and deleted
        assert result["icesink_replays_skipped_total"] == 0
    else:
        assert result["icesink_replays_skipped_total"] == 1  # batch 1 replayed, recognised
    assert len(table.snapshots()) == FILES


@pytest.mark.faults_full
def test_a_process_dying_in_its_maintenance_loses_nothing_and_leaves_files_orphan_removal_takes(
    tmp_path: Path, warehouse: Path, catalog_options: dict[str, str]
) -> None:
    """The sink's own compaction, after batch 1's commit, dies at its commit: the restart skips
    batch 1, compacts again, and the dead run's files are orphans that orphan removal deletes."""
    ids = write_input(tmp_path / "input")
    options = {
        **catalog_options,
        "table": "db.crash",
        "partition-by": "bucket(4, id)",
        "maintenance.compact.min-small-files": "2",
        "maintenance.expire.max-snapshot-age-s": "0",
        "maintenance.expire.min-snapshots-to-keep": "1",
    }
    common = job_arguments(tmp_path / "input", tmp_path / "ck", options)
    crashed = run_job(*common, failpoints="maintenance.commit=exit")
    assert crashed.returncode == 137, crashed.stderr[-3000:]  # the failpoint's exit: no cleanup
    table = catalog_from_options(options).load_table("db.crash")
    assert operation(table) == "append"  # batch 1's; no compaction
    assert parquet_files_on_disk(warehouse) - {t.file.file_path for t in table.scan().plan_files()}

    restarted = run_job(*common)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert job_result(restarted)["icesink_replays_skipped_total"] == 1  # batch 1, recognised
    table = catalog_from_options(options).load_table("db.crash")
    assert operation(table) == "replace"  # compacted after all
    read_ids = table.scan().to_arrow().column("id").to_pylist()
    assert len(read_ids) == len(ids) and set(read_ids) == ids
    remove_orphan_files(table, older_than=dt.timedelta(0))
    kept = {p for p in referenced_files(table) if "/data/" in p}  # of every snapshot kept
    assert parquet_files_on_disk(warehouse) == kept
