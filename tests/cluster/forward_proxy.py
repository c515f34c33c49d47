"""A small HTTPS forward proxy (``CONNECT`` only) on the host's leg of a test cluster: how the
nodes' npm proxies reach the public registry. The nodes' namespaces have no route to the internet
of their own (the host forwards nothing for them and its firewall is never touched), just as a
real node may reach its registry only through a corporate proxy (``HTTPS_PROXY``).

It records the ``host:port`` of every tunnel it opened (:attr:`ForwardProxy.tunnels`)."""

from __future__ import annotations

import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager

TUNNEL_IDLE_SECONDS = 60.0


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        request = self.rfile.readline(4096).decode("latin-1").split()
        while self.rfile.readline(4096) not in (b"\r\n", b"\n", b""):
            continue  # the request's headers: nothing in them matters here
        if len(request) < 2 or request[0] != "CONNECT":
            self.wfile.write(b"HTTP/1.1 405 CONNECT only\r\n\r\n")
            return
        host, _, port = request[1].rpartition(":")
        try:
            upstream = socket.create_connection((host, int(port)), timeout=30)
        except OSError:
            self.wfile.write(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            return
        self.server.tunnels.append(request[1])
        self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with upstream:
            _pipe(self.connection, upstream)


def _pipe(client: socket.socket, upstream: socket.socket) -> None:
    """Copy bytes both ways until one side closes or both idle for a minute."""
    sockets = [client, upstream]
    while True:
        readable, _, _ = select.select(sockets, [], [], TUNNEL_IDLE_SECONDS)
        if not readable:
            return
        for source in readable:
            data = source.recv(65536)
            if not data:
                return
            (upstream if source is client else client).sendall(data)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    tunnels: list[str]


class ForwardProxy:
    """The running proxy: its URL and the tunnels it opened."""

    def __init__(self, server: _Server) -> None:
        self.server = server

    @property
    def url(self) -> str:
        """``http://host:port`` for ``HTTPS_PROXY``."""
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def tunnels(self) -> list[str]:
        """``host:port`` of every tunnel opened so far."""
        return list(self.server.tunnels)


@contextmanager
def forward_proxy(address: str) -> Iterator[ForwardProxy]:
    """A forward proxy listening on ``address`` (a free port), stopped after."""
    server = _Server((address, 0), _Handler)
    server.tunnels = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ForwardProxy(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
