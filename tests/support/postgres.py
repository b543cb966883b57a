"""A real PostgreSQL server for tests: Debian's ``postgresql`` package, on a free port of 127.0.0.1.

``initdb`` creates a fresh cluster in a temporary folder, with a superuser ``icesink``
whose password is random and checked (SCRAM) on TCP connections; the server runs in the
foreground as the test process's child (as ``pg_ctl start`` would run it, minus the
daemonizing, so the kernel stops it with the test process) and listens on 127.0.0.1 only.
PostgreSQL refuses to run as root: as root, the cluster belongs to the ``postgres`` user.

:meth:`PostgresServer.sqlalchemy_uri` is what pyiceberg's SQL catalog takes as ``uri``.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.support.processes import ServerProcess, require_binary

SYSTEM_USER = "postgres"
SUPERUSER = "icesink"
DATABASE = "icesink"
DRIVER = "postgresql+psycopg2"


def postgres_bindir() -> Path:
    """The folder of ``initdb``/``postgres``: Debian keeps them off the PATH, per major version."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    initdb = require_binary("initdb", candidates[-1] if candidates else None)
    return Path(initdb).resolve().parent


class PostgresServer(ServerProcess):
    """One PostgreSQL cluster in a temporary folder, listening on 127.0.0.1:<free port>.

    Args:
        workdir: Folder for the server's log (the cluster itself lives in a folder the
            ``postgres`` user may enter, removed on :meth:`stop`).
        bindir: Folder of the PostgreSQL binaries; Debian's newest by default.
    """

    name = "postgresql"
    port_names = ("postgres",)
    stop_signal = signal.SIGINT  # "fast" shutdown: does not wait for clients to disconnect

    def __init__(self, workdir: Path, *, bindir: Path | None = None) -> None:
        super().__init__(workdir)
        self.bindir = bindir or postgres_bindir()
        self.password = secrets.token_urlsafe(18)
        self._run_as = SYSTEM_USER if os.geteuid() == 0 else None
        self.cluster_dir = Path(tempfile.mkdtemp(prefix="icesink-postgresql-"))
        if self._run_as is not None:
            shutil.chown(self.cluster_dir, self._run_as, self._run_as)
        self._initdb()

    @property
    def data_dir(self) -> Path:
        return self.cluster_dir / "data"

    def sqlalchemy_uri(self, database: str = DATABASE) -> str:
        """``postgresql+psycopg2://icesink:<password>@127.0.0.1:<port>/<database>``."""
        return f"{DRIVER}://{SUPERUSER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def _initdb(self) -> None:
        password_file = self.cluster_dir / "password"
        password_file.write_text(self.password)
        if self._run_as is not None:
            shutil.chown(password_file, self._run_as, self._run_as)
        try:
            self._as_owner(
                str(self.bindir / "initdb"),
                f"--pgdata={self.data_dir}",
                f"--username={SUPERUSER}",
                f"--pwfile={password_file}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--encoding=UTF8",
                "--no-sync",
            )
        finally:
            password_file.unlink()

    def _as_owner(self, *command: str) -> None:
        """Run ``command`` as the cluster's owner; its output goes to the server's log."""
        with self.log_path.open("ab") as log:
            subprocess.run(
                command,
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self._run_as,
                group=self._run_as,
                extra_groups=None if self._run_as is None else [],
                cwd=self.cluster_dir,
            )

    def _user(self) -> str | None:
        return self._run_as

    def _command(self) -> list[str]:
        return [
            str(self.bindir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-h",
            "127.0.0.1",
            "-k",
            str(self.cluster_dir),
            # A test cluster: durability across power loss is not needed, speed is.
            "-c",
            "fsync=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "full_page_writes=off",
        ]

    def _ready(self) -> bool:
        ready = subprocess.run(
            [str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
            check=False,
            stdin=subprocess.DEVNULL,
        )
        return ready.returncode == 0

    def start(self, attempts: int = 3) -> None:
        """Start the server and create the database ``icesink``."""
        super().start(attempts)
        self._as_owner(
            str(self.bindir / "createdb"),
            "-h",
            str(self.cluster_dir),
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
            DATABASE,
        )

    def stop(self) -> None:
        """Stop the server and remove its cluster (safe twice)."""
        super().stop()
        shutil.rmtree(self.cluster_dir, ignore_errors=True)
