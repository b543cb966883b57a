"""What a benchmark run measures besides wall time: memory and CPU of the processes, file sizes.

:class:`ProcessProbe` samples, from ``/proc`` in a background thread, the resident
memory (``VmRSS``) of the Python driver, of the driver's JVM and of each of Spark's
Python workers (the JVM's descendants running ``pyspark.daemon`` or ``pyspark.worker``),
and their CPU seconds at the start and the end of a run. Linux only.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

_PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_WORKER_MARKERS = (b"pyspark.daemon", b"pyspark.worker")
_ACTIVE_CPU_S = 0.1  # a worker that used less CPU during a run was idle in it


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # the process ended between listing and reading
        return None


def rss_bytes(pid: int) -> int:
    """Current resident memory of ``pid`` (0 when it is gone)."""
    status = _read(_PROC / str(pid) / "status")
    if status is None:
        return 0
    for line in status.splitlines():
        if line.startswith(b"VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass(frozen=True)
class _Stat:
    ppid: int
    cpu_s: float  # user + system time
    system_s: float  # system time alone: the kernel's work, page faults included


def _stat(pid: int) -> _Stat | None:
    raw = _read(_PROC / str(pid) / "stat")
    if raw is None:
        return None
    fields = raw[raw.rindex(b")") + 2 :].split()  # after "pid (comm) "
    # fields[0] is the state, fields[1] the ppid; utime and stime are fields 14 and 15 of stat(5)
    user, system = int(fields[11]) / _TICKS_PER_S, int(fields[12]) / _TICKS_PER_S
    return _Stat(int(fields[1]), user + system, system)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (0 when it is gone)."""
    stat = _stat(pid)
    return stat.cpu_s if stat else 0.0


def _descendants(root: int) -> dict[int, _Stat]:
    stats: dict[int, _Stat] = {}
    for entry in _PROC.iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: dict[int, _Stat] = {}
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found[pid] = stats[pid]
        todo.extend(children.get(pid, []))
    return found


def python_workers(jvm_pid: int) -> dict[int, _Stat]:
    """Spark's Python worker processes under the JVM (the daemon and its forked workers)."""
    workers = {}
    for pid, stat in _descendants(jvm_pid).items():
        cmdline = _read(_PROC / str(pid) / "cmdline") or b""
        if any(marker in cmdline for marker in _WORKER_MARKERS):
            workers[pid] = stat
    return workers


@dataclass
class ProbeResult:
    """Peaks (bytes) and CPU seconds of one run.

    ``worker_peak_rss_bytes`` is the largest single Python worker that used CPU during
    the run; workers are reused across runs, so an idle one keeping an earlier run's
    memory is not counted, but an active one still carries what it kept from before
    (``worker_start_rss_bytes`` tells how much that was at most). Spark ends idle
    workers, so a worker's CPU time is taken at its last sample: a worker that ends
    between two samples loses at most one interval.
    """

    driver_peak_rss_bytes: int = 0
    jvm_peak_rss_bytes: int = 0
    worker_peak_rss_bytes: int = 0
    driver_start_rss_bytes: int = 0
    jvm_start_rss_bytes: int = 0
    worker_start_rss_bytes: int = 0
    cpu_seconds: dict[str, float] = field(default_factory=dict)
    worker_system_seconds: float = 0.0  # the system part of cpu_seconds["python_workers"]
    samples: int = 0


class ProcessProbe:
    """Samples memory every ``interval_s`` while in a ``with`` block.

    Args:
        jvm_pid: The driver JVM's process id.
        interval_s: Time between samples.
    """

    def __init__(self, jvm_pid: int, interval_s: float = 0.2) -> None:
        self.jvm_pid = jvm_pid
        self.interval_s = interval_s
        self.result = ProbeResult()
        self._worker_peaks: dict[int, int] = {}
        self._worker_last: dict[int, _Stat] = {}  # at the last sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="icesink-bench-probe", daemon=True)
        self._cpu_start: dict[str, float] = {}
        self._worker_start: dict[int, _Stat] = {}

    def __enter__(self) -> ProcessProbe:
        workers = python_workers(self.jvm_pid)
        self._worker_start = workers
        self._cpu_start = self._own_cpu()
        r = self.result
        r.driver_start_rss_bytes = rss_bytes(os.getpid())
        r.jvm_start_rss_bytes = rss_bytes(self.jvm_pid)
        r.worker_start_rss_bytes = max((rss_bytes(pid) for pid in workers), default=0)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        end = self._own_cpu()
        new = _Stat(0, 0.0, 0.0)  # what a worker started during the run had used before it
        spent = [(pid, s, self._worker_start.get(pid, new)) for pid, s in self._worker_last.items()]
        used = {pid: s.cpu_s - before.cpu_s for pid, s, before in spent}
        self.result.cpu_seconds = {
            **{k: round(end[k] - self._cpu_start[k], 2) for k in end},
            "python_workers": round(sum(used.values()), 2),
        }
        system = sum(s.system_s - before.system_s for _, s, before in spent)
        self.result.worker_system_seconds = round(system, 2)
        # Only workers that ran something during this run count for the worker peak.
        self.result.worker_peak_rss_bytes = max(
            (self._worker_peaks.get(pid, 0) for pid, cpu in used.items() if cpu > _ACTIVE_CPU_S), default=0
        )

    def _own_cpu(self) -> dict[str, float]:
        me, jvm = _stat(os.getpid()), _stat(self.jvm_pid)
        return {"driver": me.cpu_s if me else 0.0, "jvm": jvm.cpu_s if jvm else 0.0}

    def _sample(self) -> None:
        r = self.result
        r.samples += 1
        r.driver_peak_rss_bytes = max(r.driver_peak_rss_bytes, rss_bytes(os.getpid()))
        r.jvm_peak_rss_bytes = max(r.jvm_peak_rss_bytes, rss_bytes(self.jvm_pid))
        for pid, stat in python_workers(self.jvm_pid).items():
            self._worker_peaks[pid] = max(self._worker_peaks.get(pid, 0), rss_bytes(pid))
            self._worker_last[pid] = stat

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._sample()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))


def size_summary(sizes: Iterable[int]) -> dict[str, int]:
    """Count, min, median and max of file sizes in bytes."""
    ordered = sorted(sizes)
    if not ordered:
        return {"count": 0, "min": 0, "median": 0, "max": 0}
    return {
        "count": len(ordered),
        "min": ordered[0],
        "median": int(statistics.median(ordered)),
        "max": ordered[-1],
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
