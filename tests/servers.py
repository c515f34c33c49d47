"""Test helpers: real servers on loopback sockets, each in its own thread and event loop."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp
from websockets.sync.server import Server, ServerConnection, serve
from websockets.typing import Subprotocol

from tests.waiting import wait_until

STARTUP_LIMIT_SECONDS = 10.0


def free_port() -> int:
    """A loopback port nobody listens on right now (someone may take it before the caller
    binds it: callers that cannot retry pass a :func:`loopback_socket` instead)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def loopback_socket() -> socket.socket:
    """A TCP socket bound to a free loopback port, not listening yet (connecting is refused)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class UvicornThread:
    """Serves an ASGI app with real uvicorn in a daemon thread; a context manager.

    Pass a socket from :func:`loopback_socket` to know the port before the server starts.
    """

    def __init__(self, app: ASGIApp, sock: socket.socket | None = None) -> None:
        """Prepare (not start) a server for ``app`` on ``sock`` or a fresh loopback socket."""
        self.sock = sock or loopback_socket()
        # proxy_headers=False: the client address is the socket peer, whatever it claims.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", ws="websockets-sansio", proxy_headers=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    @property
    def port(self) -> int:
        """The loopback port the server listens on."""
        port: int = self.sock.getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> UvicornThread:
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), "uvicorn start")
        if not self.server.started:
            raise RuntimeError(f"uvicorn did not start on port {self.port}")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.server.should_exit = True
        self.thread.join(STARTUP_LIMIT_SECONDS)
        self.sock.close()


class WebSocketThread:
    """A ``websockets`` (sync) server on a loopback port, serving in a daemon thread."""

    def __init__(
        self, handler: Callable[[ServerConnection], None], subprotocols: list[str]
    ) -> None:
        """Start serving ``handler`` at once; negotiates one of ``subprotocols``."""
        offered = [Subprotocol(name) for name in subprotocols]
        self.server: Server = serve(handler, "127.0.0.1", 0, subprotocols=offered)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (the proxy is given http URLs and derives ws ones)."""
        return f"http://127.0.0.1:{self.server.socket.getsockname()[1]}"

    def close(self) -> None:
        """Stop serving and wait for the thread."""
        self.server.shutdown()
        self.thread.join(STARTUP_LIMIT_SECONDS)
