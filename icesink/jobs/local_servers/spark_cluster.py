"""A real Spark standalone cluster on loopback: one Master and N Workers from pyspark's wheel.

pyspark's package folder is a Spark distribution (``bin/spark-class``, ``jars/``): the
Master and each Worker run as ``spark-class`` children of the process that starts them (the script
``exec``\\ s the JVM), on free ports of 127.0.0.1, with their work and log folders under
the given folder. Executors are JVMs the Workers start for each application;
:meth:`SparkCluster.kill_executor` SIGKILLs one, to see what survives a lost executor.

In the tests, drivers run as subprocesses (the test process holds a local SparkContext,
and a process has one).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from icesink.jobs.local_servers.processes import ServerProcess, http_get, port_open, start_all, wait_until
from icesink.jobs.local_servers.spark_home import JVM_START_TIMEOUT_S, spark_environment, spark_home

WORKER_CORES = 1
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "768m"
"""Fits a 1 GiB Worker (the driver asks for this in ``spark.executor.memory``)."""
DAEMON_MEMORY = "256m"
"""Heap of the Master and Worker JVMs themselves (executors have their own)."""
REGISTRATION_TIMEOUT_S = 60.0
DAEMON_DEFAULTS = "spark.master.rest.enabled false\n"
"""The Master's REST submission server would listen on the fixed port 6066."""
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


class _SparkDaemon(ServerProcess):
    start_timeout_s = JVM_START_TIMEOUT_S

    def _environment(self) -> Mapping[str, str]:
        return {**spark_environment(self.workdir), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY}

    def _prepare(self) -> None:
        (self.workdir / "work").mkdir(parents=True, exist_ok=True)
        spark_environment(self.workdir)  # creates the folders, among them the configuration's
        (self.workdir / "conf" / "spark-defaults.conf").write_text(DAEMON_DEFAULTS)

    def _spark_class(self, main_class: str, *args: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main_class, *args]


class SparkMaster(_SparkDaemon):
    """The standalone Master: ``spark://127.0.0.1:<port>``, web UI (JSON state) on another port."""

    name = "spark-master"
    port_names = ("master", "webui")

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.ports['master']}"

    def state(self) -> dict[str, Any]:
        """The Master's state as its web UI serves it (``/json/``)."""
        state: dict[str, Any] = json.loads(http_get(f"http://127.0.0.1:{self.ports['webui']}/json/"))
        return state

    def _command(self) -> list[str]:
        return self._spark_class(
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.ports["master"]),
            "--webui-port",
            str(self.ports["webui"]),
        )

    def _ready(self) -> bool:
        # The web UI starts after the RPC port is bound; probing the RPC port would fill
        # the Master's log with "disassociated" lines.
        return self.state().get("status") == "ALIVE"


class SparkWorker(_SparkDaemon):
    """A Worker of ``master_url`` with 1 core and 1 GiB for executors."""

    name = "spark-worker"
    port_names = ("worker", "webui")

    def __init__(self, workdir: Path, master_url: str) -> None:
        super().__init__(workdir)
        self.master_url = master_url

    def _command(self) -> list[str]:
        return self._spark_class(
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.ports["worker"]),
            "--webui-port",
            str(self.ports["webui"]),
            "--cores",
            str(WORKER_CORES),
            "--memory",
            WORKER_MEMORY,
            "--work-dir",
            str(self.workdir / "work"),
        )

    def _ready(self) -> bool:
        return port_open(self.ports["worker"])


class SparkCluster:
    """A Master and ``workers`` Workers, each in its own folder under ``workdir``.

    Usage::

        with SparkCluster(tmp, workers=2) as cluster:
            run_driver(script, {"master": cluster.master_url, ...}, cluster.workdir)
    """

    def __init__(self, workdir: Path, workers: int = 2) -> None:
        self.workdir = workdir
        self.master = SparkMaster(workdir / "master")
        self.workers: list[SparkWorker] = []
        self._worker_count = workers
        self.start_seconds = 0.0

    @property
    def master_url(self) -> str:
        return self.master.master_url

    def start(self) -> None:
        """Start the Master, then the Workers; return once every Worker is registered ALIVE."""
        started = time.monotonic()
        self.master.workdir.mkdir(parents=True, exist_ok=True)
        self.master.start()
        for i in range(self._worker_count):
            worker = SparkWorker(self.workdir / f"worker-{i}", self.master_url)
            worker.workdir.mkdir(parents=True, exist_ok=True)
            self.workers.append(worker)
        start_all(self.workers)
        wait_until(
            lambda: self.alive_workers() >= self._worker_count,
            REGISTRATION_TIMEOUT_S,
            f"{self._worker_count} workers registered with {self.master_url}",
        )
        self.start_seconds = time.monotonic() - started

    def alive_workers(self) -> int:
        return sum(1 for w in self.master.state().get("workers", []) if w.get("state") == "ALIVE")

    def stop(self) -> None:
        """Stop the Workers (they stop their executors), then the Master (safe twice)."""
        for worker in self.workers:
            worker.stop()
        self.master.stop()

    def executor_pids(self) -> list[int]:
        """Process ids of the executor JVMs running now, on any Worker."""
        import psutil  # only the tests kill executors; the demo needs no psutil

        pids = []
        for worker in self.workers:
            try:
                children = psutil.Process(worker.pid).children(recursive=True)
            except (psutil.NoSuchProcess, RuntimeError):
                continue
            for child in children:
                try:
                    if EXECUTOR_CLASS in child.cmdline():
                        pids.append(child.pid)
                except psutil.NoSuchProcess:
                    continue
        return sorted(pids)

    def kill_executor(self, pid: int | None = None) -> int:
        """SIGKILL one executor JVM (``pid``, or the first running); its process id."""
        if pid is None:
            running = self.executor_pids()
            if not running:
                raise AssertionError(f"no executor runs on the workers of {self.master_url}")
            pid = running[0]
        os.kill(pid, signal.SIGKILL)
        return pid

    def __enter__(self) -> SparkCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
