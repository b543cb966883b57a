"""A job's local session forks its Python workers from a daemon that imports the installed pyspark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from icesink.jobs.worker_daemon import DAEMON_MODULE, DAEMON_MODULE_CONF, daemon_conf, installed_instead

ROOT = Path(__file__).resolve().parents[3]
SPARK_LIB = Path(pyspark.__file__).parent / "python" / "lib"
PYSPARK_ZIP = SPARK_LIB / "pyspark.zip"
PY4J_ZIP = next(SPARK_LIB.glob("py4j-*.zip"), None)
SITE = str(Path(pyspark.__file__).parents[1])

needs_zips = pytest.mark.skipif(
    not PYSPARK_ZIP.exists() or PY4J_ZIP is None, reason="this pyspark ships no zips"
)


@needs_zips
def test_the_zips_go_when_the_path_holds_the_same_packages() -> None:
    path = [str(PYSPARK_ZIP), str(PY4J_ZIP), str(ROOT), SITE]
    assert installed_instead(path) == [str(ROOT), SITE]


@needs_zips
def test_a_zip_stays_when_the_installed_package_differs_or_is_missing(tmp_path: Path) -> None:
    other = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(other, "w") as archive:
        archive.writestr("pyspark/version.py", '__version__: str = "3.5.0"\n')
    assert installed_instead([str(other), SITE]) == [str(other), SITE]
    assert installed_instead([str(PYSPARK_ZIP), str(ROOT)]) == [str(PYSPARK_ZIP), str(ROOT)]


def test_only_a_local_session_of_this_python_that_names_no_daemon_gets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    assert daemon_conf("local[2]", {}) == {DAEMON_MODULE_CONF: DAEMON_MODULE}
    assert daemon_conf("spark://127.0.0.1:7077", {}) == {}
    assert daemon_conf(None, {}) == {}  # spark-submit's master: maybe a cluster
    assert daemon_conf("local[2]", {DAEMON_MODULE_CONF: "pyspark.daemon"}) == {}
    monkeypatch.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")
    assert daemon_conf("local[2]", {}) == {}


WORKERS = """
import json, sys
from icesink.jobs.spark import get_spark
spark = get_spark("worker-daemon-check", "local[1]", {"spark.ui.enabled": "false"})

def where(batches):
    import os, sys
    import pyarrow as pa
    for batch in batches:
        n = batch.num_rows
        yield pa.RecordBatch.from_pydict({
            "pid": [os.getpid()] * n, "worker": [sys.modules["pyspark.worker"].__file__] * n})

seen = []
for _ in range(3):  # three jobs, as three micro-batches
    seen += [r.asDict() for r in spark.range(2).mapInArrow(where, "pid long, worker string").collect()]
print("workers " + json.dumps(seen))
spark.stop()
"""


@needs_zips
def test_the_workers_import_the_installed_pyspark_and_serve_every_job() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_PYTHON", None)
    done = subprocess.run(
        [sys.executable, "-c", WORKERS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("workers "))
    seen = json.loads(line.removeprefix("workers "))
    assert len(seen) == 6
    assert {s["worker"] for s in seen} == {str(Path(pyspark.__file__).parent / "worker.py")}
    assert len({s["pid"] for s in seen}) == 1  # one core: one worker, kept for every job
