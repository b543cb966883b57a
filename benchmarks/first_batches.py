"""A new job's first micro-batches on a timeline: when each Spark job and its tasks ran.

Starts a session in this (new) process, as a job does, with Spark's scheduler logging at
INFO to a file (with milliseconds), prepares an icesink sink, streams ``--batches`` taxi
files through it and prints, relative to the query's ``start()``, when each Spark job
was submitted, when its first task started and when it ended, beside each
``foreachBatch`` call. That shows what a first batch waits for that later ones do not:
for example the job that starts the Python workers while the query starts
(:mod:`icesink.write.workers_ahead`), whose tasks hold the task slots::

    .venv/bin/python -m benchmarks.first_batches --mode none
    .venv/bin/python -m benchmarks.first_batches --mode bucket
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pyspark.sql import DataFrame

from benchmarks._contenders import icesink_options
from benchmarks._session import _session, _stream
from benchmarks._stream import Layout
from icesink import IcebergSink

LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss.SSS}} %m%n
logger.dag.name = org.apache.spark.scheduler.DAGScheduler
logger.dag.level = info
logger.tasks.name = org.apache.spark.scheduler.TaskSetManager
logger.tasks.level = info
"""
SUBMITTED = re.compile(r"Got (?:map stage )?job (\d+) \((.*)\) with (\d+) output partitions")
STAGE_OF_JOB = re.compile(r"Final stage: \w+ (\d+) ")
TASK_STARTED = re.compile(r"Starting task \S+ in stage (\d+)\.")
STAGE_FINISHED = re.compile(r"(?:ResultStage|ShuffleMapStage) (\d+) \(.*\) finished in ")


@dataclass
class SparkJob:
    """One Spark job of the run (a shuffle's map stage is a job of its own): seconds after ``start()``."""

    number: int
    what: str
    tasks: int
    submitted: float
    first_task: float | None = None
    finished: float | None = None


def _spark_jobs(log: Path, origin: float) -> list[SparkJob]:
    jobs: dict[int, SparkJob] = {}
    job_of_stage: dict[int, int] = {}
    last_job = -1
    for line in log.read_text().splitlines():
        stamp, message = line[:23], line[24:]
        try:
            at = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S.%f").timestamp() - origin
        except ValueError:
            continue  # a continuation line, or an empty one
        if m := SUBMITTED.search(message):
            last_job = int(m.group(1))
            what, _, where = m.group(2).rpartition(" at ")
            jobs[last_job] = SparkJob(last_job, f"{what} ({Path(where).name})", int(m.group(3)), at)
        elif (m := STAGE_OF_JOB.search(message)) and last_job in jobs:
            job_of_stage[int(m.group(1))] = last_job
        elif (m := TASK_STARTED.search(message)) and int(m.group(1)) in job_of_stage:
            job = jobs[job_of_stage[int(m.group(1))]]
            job.first_task = at if job.first_task is None else min(job.first_task, at)
        elif (m := STAGE_FINISHED.search(message)) and int(m.group(1)) in job_of_stage:
            jobs[job_of_stage[int(m.group(1))]].finished = at  # a job's final stage: the job
    return sorted(jobs.values(), key=lambda j: j.submitted)


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--mode", default="none", choices=["none", "hash", "bucket"], help="distribution-mode"
    )
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--rows-per-batch", type=int, default=1_000_000)
    parser.add_argument("--partition-values", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "icesink-bench")
    parser.add_argument(
        "--log", type=Path, help="keep Spark's scheduler log here (else in a temporary folder)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="icesink-first-batches-") as work:
        run_dir = Path(work)
        log = args.log.resolve() if args.log else run_dir / "spark.log"
        (run_dir / "log4j2.properties").write_text(LOG4J.format(log=log))
        java = f"-Dlog4j2.configurationFile=file:{run_dir / 'log4j2.properties'}"
        spark = _session(args.master, {"spark.driver.extraJavaOptions": java})
        layout = Layout(args.partition_values)
        stream = _stream(spark, args.workdir.resolve(), args.batches, args.rows_per_batch, layout)
        sink = IcebergSink.from_options(icesink_options(run_dir, layout, args.mode))
        df = stream.read()
        calls: list[tuple[int, float, float]] = []

        def timed(batch: DataFrame, batch_id: int) -> None:
            began = time.time()
            sink(batch, batch_id)
            calls.append((batch_id, began, time.time()))

        prepared = time.time()
        sink.prepare(df.schema)
        origin = time.time()
        writer = df.writeStream.foreachBatch(timed).trigger(availableNow=True)
        writer.option("checkpointLocation", str(run_dir / "checkpoint")).start().awaitTermination()
        ended = time.time() - origin
        spark.stop()
        # From prepare() on: not the jobs that wrote the input.
        jobs = [job for job in _spark_jobs(log, origin) if job.submitted >= prepared - origin]

    shape = f"{args.batches} x {args.rows_per_batch:,} rows, {args.master}"
    print(f"icesink {args.mode}, {shape}; seconds after start()")
    print(f"prepare(): {prepared - origin:.2f} to 0.00; the query ended at {ended:.2f}\n")
    print("| foreachBatch | began | ended |\n|---|---|---|")
    for batch_id, began, done in calls:
        print(f"| batch {batch_id} | {began - origin:.2f} | {done - origin:.2f} |")
    print("\n| Spark job | tasks | submitted | first task started | finished |\n|---|---|---|---|---|")
    for job in jobs:
        row = [
            job.what,
            str(job.tasks),
            _seconds(job.submitted),
            _seconds(job.first_task),
            _seconds(job.finished),
        ]
        print(f"| {job.number}: " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
