"""Iceberg Java's maintenance procedures run over and over in a thread, while a sink writes the table.

:class:`JavaMaintenance` calls ``CALL <catalog>.system.<procedure>(...)`` through the run's one
Iceberg Java reader, round after round, until stopped. A procedure Java refuses because a
concurrent commit invalidated it (a rewrite whose files an upsert deleted rows of, a commit
lost to a newer metadata version) is what a user's maintenance job meets too: it is counted
and the next round runs it again. Any other refusal stops the thread and is raised by
:meth:`JavaMaintenance.stop`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence

from tests.support.iceberg_java.reader import IcebergJavaError, IcebergJavaReader

CONFLICTS = ("ValidationException", "CommitFailedException", "CommitStateUnknownException")
"""Java's refusals of a procedure whose table changed under it: retried by the next round."""


class JavaMaintenance(threading.Thread):
    """Java's procedures ``calls`` on one table, in rounds, until :meth:`stop`.

    Args:
        java: The Iceberg Java reader.
        options: The sink's options (its ``catalog.*`` ones name Java's catalog).
        calls: Procedure calls without ``CALL <catalog>.system.``, e.g.
            ``"expire_snapshots(table => 'db.t', retain_last => 1)"``.
    """

    def __init__(self, java: IcebergJavaReader, options: Mapping[str, str], calls: Sequence[str]) -> None:
        super().__init__(name="java-maintenance", daemon=True)
        self.java, self.options, self.calls = java, dict(options), list(calls)
        self.rounds = 0
        self.results: dict[str, list[list[object]]] = {call: [] for call in self.calls}
        """Per call, the rows each successful run returned."""
        self.started: set[str] = set()
        """The calls begun at least once."""
        self.refused: list[str] = []
        """Java's conflict refusals (first line of each)."""
        self.seconds: dict[str, float] = {call: 0.0 for call in self.calls}
        self._stopping = threading.Event()
        self._error: BaseException | None = None

    def run(self) -> None:
        catalog = self.options["catalog.name"]
        try:
            while not self._stopping.is_set():
                for call in self.calls:
                    if self._stopping.is_set():
                        break
                    self.started.add(call)
                    started = time.monotonic()
                    try:
                        result = self.java.sql(f"CALL {catalog}.system.{call}", self.options)
                    except IcebergJavaError as e:
                        if not any(name in str(e) for name in CONFLICTS):
                            raise
                        self.refused.append(str(e).splitlines()[1] if "\n" in str(e) else str(e))
                        continue
                    finally:
                        self.seconds[call] += time.monotonic() - started
                    self.results[call].append(list(result.to_pylist()[0].values()) if result.num_rows else [])
                self.rounds += 1
        except BaseException as e:  # raised on the test's thread by stop()
            self._error = e

    def committed(self, call: str) -> int:
        """How many runs of ``call`` returned a non-zero first count (a rewrite that changed files)."""
        return sum(1 for row in self.results[call] if row and isinstance(row[0], int) and row[0] > 0)

    def all_began(self) -> bool:
        """Whether every call has begun, and every rewrite has committed files at least once."""
        rewrites = [call for call in self.calls if call.startswith("rewrite")]
        return self.started == set(self.calls) and all(self.committed(call) for call in rewrites)

    def all_ran(self) -> bool:
        """Whether every call has returned at least once."""
        return all(self.results[call] for call in self.calls)

    def stop(self) -> None:
        """Let the call in progress finish, wait for it, and raise what stopped the thread, if anything."""
        self._stopping.set()
        self.join()
        if self._error is not None:
            raise AssertionError(f"Java's maintenance failed after {self.rounds} rounds") from self._error
