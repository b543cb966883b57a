"""A TCP server on loopback that can go silent: it accepts connections and answers nothing.

Without a target it is silent from the start (a frozen server: the kernel still completes
the handshake, as for a process stopped with SIGSTOP). With one it forwards both ways
until :meth:`SilentServer.freeze`, then holds every byte until :meth:`SilentServer.thaw`;
:meth:`SilentServer.refuse` closes its port instead (a server that is down).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType


class SilentServer:
    """A forwarding proxy to ``target`` (``host:port``) that can be frozen, or a silent server without one."""

    def __init__(self, target: str | None = None) -> None:
        self.target = target
        self._open = threading.Event()  # set: bytes flow
        if target is not None:
            self._open.set()
        self.port = 0
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._refusing = False
        self._listen()

    def _listen(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))  # the same port again once thawed
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def freeze(self) -> None:
        """Stop answering: connections open, requests are read, nothing comes back."""
        self._open.clear()

    def refuse(self) -> None:
        """Go down: open connections are closed, new ones refused until :meth:`thaw`."""
        self._stop_listening()
        self._refusing = True
        self._drop_connections()

    def thaw(self) -> None:
        """Answer again: connections held meanwhile are closed, new ones forwarded."""
        if self._refusing:
            self._refusing = False
            self._listen()
        self._drop_connections()
        self._open.set()

    def _stop_listening(self) -> None:
        # shutdown() wakes the thread blocked in accept(); close() alone would leave the port open.
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()

    def _drop_connections(self) -> None:
        held = list(self._sockets)
        self._sockets.clear()
        for held_socket in held:
            with contextlib.suppress(OSError):
                held_socket.shutdown(socket.SHUT_RDWR)
                held_socket.close()

    def close(self) -> None:
        self._closed = True
        self._open.set()
        self._stop_listening()
        for held in self._sockets:
            with contextlib.suppress(OSError):
                held.close()

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            self._sockets.append(client)
            if self.target is None or not self._open.is_set():
                continue  # silent: the connection stays open, unanswered, until thawed or closed
            host, port = self.target.rsplit(":", 1)
            try:
                upstream = socket.create_connection((host, int(port)))
            except OSError:
                client.close()
                continue
            self._sockets.append(upstream)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._open.wait()  # frozen: hold the bytes
                if self._closed or source not in self._sockets:
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.close()
