"""Spark's Python worker daemon, importing pyspark from the installed package instead of Spark's zip.

Spark starts the daemon that forks its Python workers as ``python -m pyspark.daemon`` with
``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on ``PYTHONPATH``; with a
pip-installed pyspark, ``SPARK_HOME`` is the installed package, which ships those zips
beside itself. Python keeps no compiled bytecode of modules imported from a zip: the daemon
compiles pyspark from source each time a job starts it (0.47-0.49 CPU s, against 0.07-0.14 s
from the installed package), and each worker, which imports ``pyspark.worker`` after the
fork (on purpose: pyarrow and pandas may start threads, which a fork must not copy), the
worker's own modules (0.04 s more a worker; benchmarks/LOG.md, 2026-12-02).

``python -m icesink.jobs.worker_daemon`` (Spark's ``spark.python.daemon.module``, set by
:func:`icesink.jobs.spark.get_spark` for a local session) takes a zip off the path when the
rest of the path holds the same package (the same ``version.py``), then runs pyspark's own
daemon: the workers then import the installed pyspark, with its bytecode. Nothing else of
pyspark's daemon changes; with another pyspark (or none) installed, the zips stay.
"""

from __future__ import annotations

import importlib.machinery
import os
import shutil
import site
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

DAEMON_MODULE_CONF = "spark.python.daemon.module"
DAEMON_MODULE = "icesink.jobs.worker_daemon"
#: The zips Spark puts on its Python processes' path: the package each holds, and how its name starts.
SPARK_ZIPS = {"pyspark": "pyspark", "py4j": "py4j-"}


def daemon_conf(master: str | None, conf: Mapping[str, str]) -> dict[str, str]:
    """``spark.python.daemon.module`` naming this module for a session of ``master``, or nothing.

    Only a local session's workers surely run this process's Python and find ``icesink`` where
    it did (its ``PYTHONPATH``, its working folder, its site-packages: a worker's path has the
    same); another master's executors may not have it, and ``conf`` naming a daemon wins.
    """
    if DAEMON_MODULE_CONF in conf or not (master or "").startswith("local"):
        return {}
    python = os.environ.get("PYSPARK_PYTHON", sys.executable)
    if os.path.abspath(shutil.which(python) or python) != os.path.abspath(sys.executable):
        return {}  # a virtual environment's python links to the base one: compare the links
    root = Path(__file__).resolve().parents[2]  # the folder holding the icesink package
    given = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    reachable = [*given, os.getcwd(), *site.getsitepackages(), site.getusersitepackages()]
    if root not in {Path(entry).resolve() for entry in reachable if entry}:
        return {}
    return {DAEMON_MODULE_CONF: DAEMON_MODULE}


def installed_instead(path: list[str]) -> list[str]:
    """``path`` without Spark's zips whose package the rest of ``path`` holds in the same version."""
    kept = list(path)
    for package, prefix in SPARK_ZIPS.items():
        for entry in [e for e in kept if Path(e).name.startswith(prefix) and e.endswith(".zip")]:
            others = [e for e in kept if e != entry]
            if _same_version(package, entry, others):
                kept.remove(entry)
    return kept


def _same_version(package: str, zip_entry: str, others: list[str]) -> bool:
    """Whether ``others`` hold ``package`` with the same ``version.py`` as the zip ``zip_entry``."""
    spec = importlib.machinery.PathFinder.find_spec(package, others)
    if spec is None or not spec.submodule_search_locations:
        return False
    installed = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        with zipfile.ZipFile(zip_entry) as archive:
            zipped = archive.read(f"{package}/version.py")
        return installed.read_bytes() == zipped
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def main() -> None:
    """Run pyspark's daemon with the installed pyspark first (see the module)."""
    sys.path[:] = installed_instead(sys.path)
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
