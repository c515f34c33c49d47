"""A unix-socket relay in front of the Docker engine that a test can cut and restore.

The shared ``dockerd`` is never touched (other sessions use it): a kiln process under test gets
``DOCKER_HOST=unix://<relay socket>`` instead, and the relay copies bytes to the real engine
while it is up. :meth:`DockerRelay.cut` takes the engine away in one of two ways, breaking every
connection in flight either way:

- ``"refuse"``: nobody listens on the socket any more (``ECONNREFUSED``), as when dockerd is
  stopped;
- ``"hang"``: connections are accepted and never answered, as when dockerd is wedged or a
  remote engine's network drops packets.

:meth:`DockerRelay.restore` brings it back. Threads only: the relay must keep working whatever
the test's event loop does.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import Literal

Mode = Literal["pass", "refuse", "hang"]
CHUNK = 65536


def engine_socket() -> str:
    """The path of the real engine's socket (``DOCKER_HOST`` when it names a unix socket)."""
    host = os.environ.get("DOCKER_HOST", "")
    return host.removeprefix("unix://") if host.startswith("unix://") else "/var/run/docker.sock"


class DockerRelay:
    """Relay ``path`` to ``upstream`` (a unix socket path) until cut; a context manager."""

    def __init__(self, path: Path, upstream: str | None = None) -> None:
        """Listen on ``path`` at once."""
        self.path, self.upstream = path, upstream or engine_socket()
        self.mode: Mode = "pass"
        self.accepted = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._listen()

    @property
    def url(self) -> str:
        """The ``DOCKER_HOST`` value for the relay."""
        return f"unix://{self.path}"

    def cut(self, mode: Mode) -> None:
        """Take the engine away (``refuse`` or ``hang``); connections in flight break."""
        with self._lock:
            self.mode = mode
        if mode == "refuse":
            self._stop_listening()
        self._drop_all()

    def restore(self) -> None:
        """Relay to the engine again; hung connections are dropped."""
        with self._lock:
            previous, self.mode = self.mode, "pass"
        self._drop_all()
        if previous == "refuse":
            self._listen()

    def close(self) -> None:
        """Stop listening and drop every connection."""
        self._stop_listening()
        self._drop_all()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def __enter__(self) -> DockerRelay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _listen(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(128)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _stop_listening(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()  # the socket file stays: connecting to it is refused

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by _stop_listening
            self.accepted += 1
            self._keep(client)
            if self.mode == "hang":
                continue  # held open, never answered, until restore or close
            try:
                engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                engine.connect(self.upstream)
            except OSError:
                self._drop(client)
                continue
            self._keep(engine)
            for source, sink in ((client, engine), (engine, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(CHUNK):
                sink.sendall(chunk)
        except OSError:
            pass
        self._drop(source)
        self._drop(sink)

    def _keep(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def _drop_all(self) -> None:
        with self._lock:
            socks = list(self._open)
        for sock in socks:
            self._drop(sock)
