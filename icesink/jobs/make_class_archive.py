"""``python -m icesink.jobs.make_class_archive``: the class archive of the Spark driver's JVM.

Streams a small taxi workload through the sink, as ``make demo`` does, in a JVM started
with ``-XX:ArchiveClassesAtExit``, so that the archive holds the classes a job loads up
to the end of its first micro-batches (:mod:`icesink.jobs.class_archive` says where it
goes and how jobs use it). The file is moved into place only once that JVM has exited:
a torn archive would crash the JVM that maps it. ``make env`` runs it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from icesink.jobs.class_archive import ENV_VARIABLE, archive_path

WORKLOAD_FILES, WORKLOAD_ROWS = 2, 20_000


def build(path: Path) -> float:
    """Make the archive at ``path`` from a small stream through the sink; the seconds taken.

    Raises:
        RuntimeError: The JVM exited without writing an archive.
    """
    # Imported here, not above: ``make env`` runs :func:`main` before every target, and
    # when the archive is there it answers in 0.4 s instead of the 2.8 s these take.
    from pyspark import SparkContext

    from icesink.jobs.demo import local_sink, stream_files
    from icesink.jobs.spark import get_spark
    from icesink.jobs.taxi_workload import write_files

    os.environ[ENV_VARIABLE] = "off"  # this JVM writes an archive; it maps none
    started = time.perf_counter()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    with tempfile.TemporaryDirectory(prefix="icesink-class-archive-") as work:
        root = Path(work)
        spark = get_spark(
            "icesink-class-archive",
            "local[2]",
            {"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"},
        )
        source = write_files(spark, root / "input", WORKLOAD_FILES, WORKLOAD_ROWS)
        sink = local_sink(root, "archive.trips")
        stream_files(spark, sink, source, root / "checkpoint")
        sink.catalog.load_table("archive.trips").scan().to_arrow()
        spark.stop()
        jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
        jvm.stdin.close()  # the JVM exits on the end of its input, writing the archive first
        jvm.wait(timeout=300)
    if not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the JVM wrote no class archive at {partial} (exit code {jvm.returncode})")
    partial.replace(path)  # whole, or not there at all
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0].split(": ", 1)[1])
    parser.add_argument("--force", action="store_true", help="make it again even if it exists")
    args = parser.parse_args(argv)
    path = archive_path()
    if path is None:
        print(f"{ENV_VARIABLE} is off: no class archive made")
        return 0
    if path.is_file() and not args.force:
        print(f"class archive present: {path}")
        return 0
    print(f"making the Spark driver's class archive (once per Java and Spark) at {path} ...", flush=True)
    seconds = build(path)
    print(f"class archive made in {seconds:.0f} s: {path} ({path.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
