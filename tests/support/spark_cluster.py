"""A Spark standalone cluster on loopback for tests (:mod:`icesink.jobs.local_servers.spark_cluster`)."""

from __future__ import annotations

from icesink.jobs.local_servers.spark_cluster import (
    EXECUTOR_MEMORY,
    SparkCluster,
    SparkMaster,
    SparkWorker,
)

__all__ = ["EXECUTOR_MEMORY", "SparkCluster", "SparkMaster", "SparkWorker"]
