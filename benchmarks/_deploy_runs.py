"""One measured run of :mod:`benchmarks.deploy`: the reference stream through IcebergSink to one target.

A :class:`Target` is where the sink writes: the embedded default (SQLite catalog and a
warehouse folder in the run's folder, exactly what ``benchmarks.run``'s ``icesink-bucket``
writes to) or a REST catalog whose tables live on S3, with the sink's state on S3 too.
:func:`run_target` streams the input through a fresh sink (fresh table and checkpoint)
with :mod:`benchmarks._contenders`' query runner, and measures each ``foreachBatch`` call:
its wall time, the sink's commit step (its ``icesink_step_duration_seconds`` histogram,
that is the ``Committer``'s time), the S3 requests the server counted during the call
(SeaweedFS's own Prometheus counters, diffed around the call, so every request of the
executors and of the driver is in it) and the REST catalog's HTTP requests (counted on
the driver's catalog session, the only one that talks to the catalog).

:func:`driver_main` is the same run in a process of its own (``python -m benchmarks.deploy
--driver``), for a run on another master: its arguments, credentials included, arrive as
JSON on standard input, never on the command line.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pyiceberg.catalog import Catalog

from benchmarks._contenders import (
    RunResult,
    _check_rows,
    _iceberg_files,
    _run_query,
    _TimedBatches,
)
from benchmarks._stream import Layout, Stream
from icesink import IcebergSink
from icesink.jobs.local_servers.seaweedfs import s3_request_counts
from icesink.metric_families import STEPS

TABLE = "taxi"
WARM_UP_BATCHES, WARM_UP_ROWS = 2, 5_000
CLUSTER_CONF = {
    "spark.executor.memory": "768m",  # fits a 1 GiB Worker (icesink.jobs.local_servers.spark_cluster)
    "spark.executor.cores": "1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
DRIVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "4g",
}


@dataclass(frozen=True)
class Target:
    """Where a run writes.

    Attributes:
        name: How the results name it.
        rest: pyiceberg properties of a REST catalog (credentials included); ``None``: a
            SQLite catalog and a local warehouse in the run's folder.
        state_root: Where the sink's state goes (``state-location``, one folder per run).
        metrics_url: The S3 server's Prometheus endpoint, to count its requests per batch.
    """

    name: str
    rest: dict[str, str] | None = None
    state_root: str | None = None
    metrics_url: str | None = None

    def sink_options(self, run_dir: Path, namespace: str, layout: Layout) -> dict[str, str]:
        """The sink's options: ``benchmarks.run``'s ``icesink-bucket`` but for the catalog and the state."""
        catalog = self.rest or {
            "type": "sql",
            "uri": f"sqlite:///{run_dir}/catalog.db",
            "warehouse": f"file://{run_dir}/warehouse",
        }
        options = {
            "catalog.name": "bench",
            **{f"catalog.{key}": value for key, value in catalog.items()},
            "table": f"{namespace}.{TABLE}",
            "partition-by": layout.partition_by,
            "distribution-mode": "bucket",
        }
        if self.state_root:
            options["state-location"] = f"{self.state_root.rstrip('/')}/{namespace}"
        return options


@dataclass
class DeployRun:
    """One run: the throughput run's result plus what each batch cost the storage and the catalog."""

    result: RunResult
    target: str
    master: str
    location: str
    s3_requests: list[dict[str, int]] = field(default_factory=list)
    rest_requests: list[dict[str, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.result.to_json(),
            "target": self.target,
            "master": self.master,
            "location": self.location,
            "s3_requests": self.s3_requests,
            "rest_requests": self.rest_requests,
        }


class _RestRequests:
    """Counts the HTTP requests of a pyiceberg REST catalog by method (a hook on its session)."""

    def __init__(self, catalog: Catalog) -> None:
        self.counts: Counter[str] = Counter()
        session = getattr(catalog, "_session", None)  # pyiceberg's RestCatalog: a requests.Session
        self.enabled = session is not None
        if session is not None:
            session.hooks["response"].append(self._count)

    def _count(self, response: Any, *args: Any, **kwargs: Any) -> None:
        self.counts[str(response.request.method)] += 1


class _MeasuredBatches(_TimedBatches):
    """``_TimedBatches`` for any table name, also counting S3 and REST requests around each call."""

    def __init__(self, sink: IcebergSink, table: str, metrics_url: str | None, rest: _RestRequests) -> None:
        super().__init__(sink, sink)
        self.table = table
        self.metrics_url = metrics_url
        self.rest = rest
        self.s3_requests: list[dict[str, int]] = []
        self.rest_requests: list[dict[str, int]] = []

    def step_sum(self, step: str) -> float:
        assert self.sink is not None
        value = self.sink.metrics.registry.get_sample_value(
            "icesink_step_duration_seconds_sum", {"table": self.table, "step": step}
        )
        return value or 0.0

    def __call__(self, batch_df: Any, batch_id: int) -> None:
        s3_before = s3_request_counts(self.metrics_url) if self.metrics_url else {}
        rest_before = Counter(self.rest.counts)
        super().__call__(batch_df, batch_id)
        if self.metrics_url:
            after = s3_request_counts(self.metrics_url)
            diff = {f"{b}:{t}": n - s3_before.get((b, t), 0) for (b, t), n in after.items()}
            self.s3_requests.append({k: n for k, n in sorted(diff.items()) if n})
        if self.rest.enabled:
            self.rest_requests.append(dict(sorted((self.rest.counts - rest_before).items())))


def run_target(
    target: Target, stream: Stream, run_dir: Path, jvm_pid: int, namespace: str, master: str
) -> DeployRun:
    """Stream ``stream`` into a new table ``<namespace>.taxi`` of ``target``; checked and measured."""
    name = f"icesink-{target.name}"
    options = target.sink_options(run_dir, namespace, stream.layout)
    sink = IcebergSink.from_options(options)
    rest = _RestRequests(sink.catalog)
    df = stream.read()
    sink.prepare(df.schema)
    measured = _MeasuredBatches(sink, options["table"], target.metrics_url, rest)
    query = _run_query(stream, name, df.writeStream.foreachBatch(measured), run_dir, jvm_pid)
    steps = {step: measured.step_sum(step) for step in STEPS}
    table = sink.catalog.load_table(options["table"])
    rows, files = _iceberg_files(table)
    _check_rows(name, rows, stream)
    sink.close()
    result = RunResult(
        name, query.seconds, rows, query.probe, files, measured.batch_seconds, measured.commit_seconds, steps,
        query.trigger_ms,
    )  # fmt: skip
    return DeployRun(
        result, target.name, master, table.location(), measured.s3_requests, measured.rest_requests
    )


# --- the same run in a driver process of its own -------------------------------------------------


def driver_main(arguments: dict[str, Any]) -> dict[str, Any]:
    """A warm-up run and the measured run on ``arguments["master"]``; the measured run as JSON.

    Arguments: ``master``, ``cluster`` (the cluster's executor settings apply), ``input``
    and ``warm_up_input`` (folders of the workload's files), ``batches``, ``rows_per_batch``,
    ``target`` (a :class:`Target` as a mapping), ``run_dir``, ``namespace``.
    """
    from icesink.jobs.spark import get_spark

    conf = {**DRIVER_CONF, **(CLUSTER_CONF if arguments["cluster"] else {})}
    spark = get_spark("icesink-bench-deploy", arguments["master"], conf)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        jvm: Any = spark.sparkContext._jvm
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
        layout = Layout(64)
        target = Target(**arguments["target"])
        run_dir = Path(arguments["run_dir"])

        def stream_of(folder: str, batches: int, rows: int) -> Stream:
            schema = spark.read.parquet(folder).schema
            return Stream(spark, Path(folder), schema, layout, batches * rows, batches)

        warm_up = stream_of(arguments["warm_up_input"], WARM_UP_BATCHES, WARM_UP_ROWS)
        (run_dir / "warm-up").mkdir(parents=True)
        run_target(target, warm_up, run_dir / "warm-up", jvm_pid, f"{arguments['namespace']}_w", "warm-up")
        shutil.rmtree(run_dir / "warm-up", ignore_errors=True)
        stream = stream_of(arguments["input"], arguments["batches"], arguments["rows_per_batch"])
        (run_dir / "run").mkdir(parents=True)
        started = time.perf_counter()
        run = run_target(
            target, stream, run_dir / "run", jvm_pid, arguments["namespace"], arguments["master"]
        )
        return {**run.to_json(), "process_seconds": round(time.perf_counter() - started, 1)}
    finally:
        spark.stop()


def target_json(target: Target) -> dict[str, Any]:
    """``target`` as the mapping :func:`driver_main` takes (credentials included: send it on stdin)."""
    return asdict(target)


def main_json(text: str) -> str:
    """:func:`driver_main` from and to JSON text."""
    return json.dumps(driver_main(json.loads(text)))
