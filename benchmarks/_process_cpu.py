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


class TreeCpuSampler:
    """The CPU seconds of a process and its descendants over time, read from ``/proc`` on a thread.

    A benchmark that wants a run's CPU at moments the run itself does not report (a snapshot's
    commit, say) samples the process tree every ``interval_s`` from outside it, and
    :meth:`at` interpolates between samples. Each process counts its own CPU and its reaped
    children's (Spark's Python workers that ended, the launcher JVM of ``spark-submit``); the
    samples never decrease, so a process ending between two reads loses no CPU already seen.

    Args:
        pid: The tree's root (a job's interpreter, Kafka Connect's JVM).
        interval_s: Seconds between samples.
    """

    def __init__(self, pid: int, interval_s: float = 0.2):
        import threading

        self.pid = pid
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (wall-clock time, CPU seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"cpu-of-{pid}", daemon=True)

    def start(self) -> TreeCpuSampler:
        """Take the first sample now, then one every ``interval_s`` until :meth:`stop`."""
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take a last sample (while the tree lives) and end the thread."""
        self._stop.set()
        self._thread.join()
        self._sample()

    def at(self, moment: float) -> float:
        """The tree's CPU seconds at wall-clock ``moment``, interpolated between the samples around it."""
        import bisect

        times = [t for t, _ in self.samples]
        i = bisect.bisect_left(times, moment)
        if i == 0:
            return self.samples[0][1]
        if i == len(self.samples):
            return self.samples[-1][1]
        (t0, c0), (t1, c1) = self.samples[i - 1], self.samples[i]
        return c0 + (c1 - c0) * (moment - t0) / (t1 - t0) if t1 > t0 else c1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        import time

        import psutil

        total = 0.0
        try:
            root = psutil.Process(self.pid)
            processes = [root, *root.children(recursive=True)]
        except psutil.Error:  # the root ended: nothing more to read
            return
        for process in processes:
            try:
                t = process.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
        previous = self.samples[-1][1] if self.samples else 0.0
        self.samples.append((time.time(), max(total, previous)))


JVM_THREAD_KINDS = (
    ("jit", ("C1 CompilerThre", "C2 CompilerThre")),
    ("gc", ("GC Thread", "G1 ", "VM Thread", "VM Periodic")),
    ("tasks", ("Executor task",)),
)
"""Thread kinds of a HotSpot JVM by the first 15 characters of their names (Linux's ``comm``)."""


def jvm_thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds of a live JVM's threads by kind: JIT compilers, garbage collection, Spark's
    task threads and the rest (``other``), from ``/proc/<pid>/task``."""
    import os

    ticks = os.sysconf("SC_CLK_TCK")
    totals = {kind: 0.0 for kind, _ in JVM_THREAD_KINDS} | {"other": 0.0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        seconds = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        kind = next((k for k, prefixes in JVM_THREAD_KINDS if name.startswith(prefixes)), "other")
        totals[kind] += seconds
    return totals
