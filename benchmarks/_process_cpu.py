"""CPU seconds of a benchmark's process tree: the driver, its JVM, Spark's Python workers, the broker."""

from __future__ import annotations

BROKER_PROCESS = "tansu"  # its CPU is the broker's, not the job's


def tree_cpu_seconds() -> dict[str, float]:
    """CPU seconds of this process (the driver), the JVM, Spark's Python workers (reaped ones
    too) and the broker (started by this process, but not the job's: see :func:`job_cpu_seconds`)."""
    import psutil

    totals = {"driver": 0.0, "jvm": 0.0, "python_workers": 0.0, "broker": 0.0}
    me = psutil.Process()
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
            name = process.name()
        except psutil.Error:  # ended meanwhile
            continue
        kind = (
            "driver"
            if process.pid == me.pid
            else "jvm"
            if name == "java"
            else "broker"
            if name == BROKER_PROCESS
            else "python_workers"
        )
        if kind == "driver":
            totals[kind] += times.user + times.system  # its children are the JVM: counted below
        else:
            totals[kind] += times.user + times.system + times.children_user + times.children_system
    return totals


def job_cpu_seconds(cpu: dict[str, float]) -> float:
    """The job's CPU seconds of :func:`tree_cpu_seconds`: the driver, the JVM and the Python workers."""
    return sum(seconds for kind, seconds in cpu.items() if kind != "broker")
