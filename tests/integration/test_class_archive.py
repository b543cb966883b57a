"""A job's driver JVM maps Spark's classes from the archive ``make env`` made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from icesink.jobs import class_archive

ROOT = Path(__file__).resolve().parents[2]
SESSION = """
import sys
from icesink.jobs.spark import get_spark
log = "-Xlog:class+load=info:file=" + sys.argv[1]
conf = {"spark.ui.enabled": "false", "spark.driver.extraJavaOptions": log}
get_spark("class-archive-check", "local[1]", conf).range(10).count()
"""


def test_a_jobs_jvm_loads_spark_from_the_archive(tmp_path: Path) -> None:
    archive = class_archive.archive_path()
    assert archive is not None and archive.is_file(), f"no class archive at {archive}: run make env"
    log = tmp_path / "classes.log"
    proc = subprocess.run(
        [sys.executable, "-c", SESSION, str(log)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "shared archive" not in proc.stdout + proc.stderr  # the JVM did not refuse it
    sources = {}
    for line in log.read_text().splitlines():
        name, _, source = line.partition("[class,load] ")[2].partition(" source: ")
        sources[name] = source
    assert sources["org.apache.spark.SparkContext"] == "shared objects file (top)"
    from_archive = sum(source == "shared objects file (top)" for source in sources.values())
    from_jars = sum(source.endswith(".jar") for source in sources.values())
    assert from_archive > 5 * from_jars, (from_archive, from_jars)
