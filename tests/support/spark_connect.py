"""A real Spark Connect server on loopback, from pyspark's wheel.

It runs the class ``sbin/start-connect-server.sh`` starts
(``org.apache.spark.sql.connect.service.SparkConnectServer``, shipped in pyspark's
``jars/``) with the same arguments, but through ``bin/spark-submit`` in the foreground: the
script hands the JVM to ``nohup`` in the background, where neither the test process
nor the kernel (``PR_SET_PDEATHSIG``) could stop it if the tests die. Its gRPC endpoint
listens on a free port of 127.0.0.1; clients connect to :attr:`SparkConnectServer.remote`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.support.processes import ServerProcess, port_open
from tests.support.spark_process import JVM_START_TIMEOUT_S, spark_environment, spark_home

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_MEMORY = "1g"


class SparkConnectServer(ServerProcess):
    """A Spark Connect server whose Spark runs on ``master`` (``local[2]`` by default).

    Args:
        workdir: Folder for the server's logs, scratch space and Python workers' files.
        master: The server's Spark master.
        conf: More Spark settings of the server.
    """

    name = "spark-connect"
    port_names = ("grpc",)
    start_timeout_s = JVM_START_TIMEOUT_S

    def __init__(
        self, workdir: Path, master: str = "local[2]", conf: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(workdir)
        self.master = master
        self.conf = dict(conf or {})

    @property
    def remote(self) -> str:
        """The client's connection string, ``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    def _environment(self) -> Mapping[str, str]:
        return {**spark_environment(self.workdir), "SPARK_CONNECT_MODE": "0"}

    def _command(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            **self.conf,
        }
        settings = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
        return [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            SERVER_CLASS,
            "--name",
            "Spark Connect server",
            "--master",
            self.master,
            "--driver-memory",
            DRIVER_MEMORY,
            *settings,
            "spark-internal",
        ]

    def _ready(self) -> bool:
        return port_open(self.port)
