"""Server processes on loopback: free ports on 127.0.0.1, readiness polling, sure cleanup.

Used by ``make demo-cluster`` and by the tests' fixtures. A :class:`ServerProcess` runs one
child process bound to loopback ports chosen free at start. It is stopped by
:meth:`ServerProcess.stop`, at interpreter exit (atexit), and, through
``PR_SET_PDEATHSIG``, by the kernel when the process that started it dies without cleaning
up. The child must therefore be the server itself (a launcher script that ``exec``\\ s it
is fine; one that forks it into the background is not).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
_PR_SET_PDEATHSIG = 1

_live: weakref.WeakSet[ServerProcess] = weakref.WeakSet()

T = TypeVar("T")


def find_binary(name: str, path: str | None = None) -> str | None:
    """The path of ``name`` (or ``path`` when given and executable); ``None`` when neither exists."""
    return path if path is not None and os.access(path, os.X_OK) else shutil.which(name)


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports of 127.0.0.1 that were free a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port() -> int:
    """One TCP port of 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


def http_get(url: str, timeout_s: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return str(response.read().decode())


def wait_until(check: Callable[[], T], timeout_s: float, what: str, interval_s: float = 0.25) -> T:
    """Poll ``check`` until it returns something true; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception as e:  # the server may not be up yet
            last_error = e
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout_s:.0f}s waiting for {what} (last error: {last_error})"
            )
        time.sleep(interval_s)


def die_with_parent() -> None:
    """In the child, before exec: have the kernel kill it when its starter dies.

    Runs after ``subprocess`` dropped to another user (a change of credentials clears the
    setting, so it must come last). The "parent" is the thread that started the child:
    start servers from a thread that outlives them (not from a short-lived pool thread).
    """
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ServerProcess:
    """A server process bound to free ports of 127.0.0.1.

    Subclasses name their ports in ``port_names`` (the first is :attr:`port`), build the
    command line from :attr:`ports`, and say when the server is ready.

    Args:
        workdir: Folder for the server's data and its log (``<name>.log``).
    """

    name = "server"
    port_names: tuple[str, ...] = ("http",)
    stop_signal = signal.SIGTERM
    start_timeout_s = START_TIMEOUT_S

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.ports: dict[str, int] = {}
        self.log_path = workdir / f"{self.name}.log"
        self.start_seconds = 0.0
        self._launched_at = 0.0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        return self.ports[self.port_names[0]]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._process.pid

    def _command(self) -> Sequence[str]:
        raise NotImplementedError

    def _environment(self) -> Mapping[str, str] | None:
        """The child's environment; ``None`` inherits this process's."""
        return None

    def _user(self) -> str | None:
        """The user to run the server as; ``None`` keeps this process's."""
        return None

    def _ready(self) -> bool:
        raise NotImplementedError

    def _prepare(self) -> None:
        """Work before each start attempt (ports are chosen already)."""

    def start(self, attempts: int = 3) -> None:
        """Start and wait until ready; retry on other ports if a chosen one was taken meanwhile."""
        started = time.monotonic()
        for _ in range(attempts):
            self.launch()
            if self.await_ready():
                self.start_seconds = time.monotonic() - started
                return
        raise RuntimeError(f"{self.name} did not start; its log:\n{self.log_tail()}")

    def launch(self) -> None:
        """Start the process on newly chosen free ports, without waiting for it.

        Call it from the thread that lives as long as the server: the kernel kills the
        child when the thread that started it ends.
        """
        self.ports = dict(zip(self.port_names, free_ports(len(self.port_names)), strict=True))
        self._prepare()
        self._launched_at = time.monotonic()
        self._process = self._spawn()
        _live.add(self)

    def await_ready(self) -> bool:
        """Wait until the launched server is ready; stop it and answer false if it died or timed out."""
        process = self._process
        deadline = time.monotonic() + self.start_timeout_s
        while process is not None and time.monotonic() < deadline and process.poll() is None:
            with contextlib.suppress(OSError, ValueError):  # not listening, or a half-served answer
                if self._ready():
                    self.start_seconds = time.monotonic() - self._launched_at
                    return True
            time.sleep(0.1)
        self.stop()
        return False

    def _spawn(self) -> subprocess.Popen[bytes]:
        environment, user = self._environment(), self._user()
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                list(self._command()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=None if environment is None else dict(environment),
                user=user,
                group=user,
                extra_groups=None if user is None else [],
                preexec_fn=die_with_parent,  # noqa: PLW1509 (only a prctl call)
            )

    def stop(self) -> None:
        """Terminate the process, then kill it if it lingers (safe twice)."""
        process, self._process = self._process, None
        _live.discard(self)
        if process is None or process.poll() is not None:
            return
        process.send_signal(self.stop_signal)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def start_all(servers: Sequence[ServerProcess]) -> None:
    """Start several servers at once (they boot in parallel); retry the ones that did not come up."""
    for server in servers:
        server.launch()
    for server in servers:
        if not server.await_ready():
            server.start()


@atexit.register
def _stop_live_servers() -> None:
    for server in list(_live):
        server.stop()
