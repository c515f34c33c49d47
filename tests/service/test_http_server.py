"""uvicorn as kiln runs it: no signal handlers of its own, kiln's settings."""

from __future__ import annotations

import signal

from starlette.applications import Starlette

from app.service.http_server import GRACEFUL_SHUTDOWN_SECONDS, KilnServer, server_config


def test_the_server_leaves_signals_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    server = KilnServer(server_config(Starlette(), "127.0.0.1", 0))
    with server.capture_signals():
        inside = signal.getsignal(signal.SIGTERM)
    assert inside is before


def test_the_configuration() -> None:
    config = server_config(Starlette(), "0.0.0.0", 8123, access_log=False)
    assert (config.host, config.port, config.access_log) == ("0.0.0.0", 8123, False)
    assert config.log_config is None
    assert config.timeout_graceful_shutdown == GRACEFUL_SHUTDOWN_SECONDS
    assert config.proxy_headers is False
