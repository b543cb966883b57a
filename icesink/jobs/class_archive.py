"""A class data archive of the Spark driver's JVM: a new job starts in about half the time.

A job's JVM loads some 12,000 classes from Spark's jars for its session and first job,
reading, parsing and verifying each; Java 17 can instead map them from an archive made
by an earlier run (AppCDS, ``-XX:SharedArchiveFile``). On a 2-core machine that took a
local session's start from 10 s to 5-6 s and its first Parquet job from 9.5 s to 5.5 s.

``python -m icesink.jobs.make_class_archive`` (run by ``make env``) makes the archive
where :func:`archive_path` says; :func:`java_options` names it to every driver JVM that
:func:`icesink.jobs.spark.get_spark` starts. The archive belongs to one Java build and
one class path (Spark's configuration folder and jars): its name carries both, so another
Java, pyspark or configuration folder finds none; a JVM that cannot use one says so on
stderr and starts as before. ``ICESINK_CLASS_ARCHIVE`` names another file, or ``off``
turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pyspark

ENV_VARIABLE = "ICESINK_CLASS_ARCHIVE"
QUIET = "-Xlog:cds*=off -Xlog:cds*=warning:stderr"
"""The JVM's archive messages on stderr, warnings only (its default writes them to stdout)."""


def archive_path() -> Path | None:
    """Where the archive of this Java and these Spark jars is (or goes); ``None`` when turned off."""
    chosen = os.environ.get(ENV_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "off", "false", "0") else Path(chosen)
    return Path(sys.prefix) / "share" / "icesink" / f"spark-classes-{_runtime_key()}.jsa"


def java_options() -> str:
    """The driver JVM's options that map the archive, or ``""`` when there is none."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _runtime_key() -> str:
    """Twelve hex digits naming the Java binary (by path and mtime) and the JVM's class path.

    The class path is Spark's configuration folder, then its jars: an archive made with
    one folder is refused by a JVM given another (the tests' servers and cluster drivers
    have folders of their own), so each finds its own archive or none.
    """
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    java_id = f"{os.path.realpath(java)}:{os.stat(java).st_mtime_ns}" if java else "no-java"
    spark_home = os.path.realpath(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__))
    conf_dir = os.path.realpath(os.environ.get("SPARK_CONF_DIR") or os.path.join(spark_home, "conf"))
    key = f"{java_id}|{pyspark.__version__}|{spark_home}|{conf_dir}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]
