"""uvicorn, run programmatically inside kiln's own event loop.

:class:`KilnServer` is uvicorn's server without its signal handling: ``kiln serve`` owns the
signals (it has workers, Redis and sandboxes to stop in order) and ends the server by setting
``should_exit``. :func:`server_config` holds the settings kiln runs with: its JSON logging
(``log_config=None`` keeps uvicorn from installing its own), WebSockets for the preview's HMR,
and a bounded graceful shutdown (event streams are long-lived; they are cut after it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import uvicorn
from starlette.types import ASGIApp

GRACEFUL_SHUTDOWN_SECONDS = 5


class KilnServer(uvicorn.Server):
    """A uvicorn server that leaves signals to its caller."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Install nothing: the caller handles SIGINT/SIGTERM."""
        yield


def server_config(app: ASGIApp, host: str, port: int, *, access_log: bool = True) -> uvicorn.Config:
    """The uvicorn configuration ``kiln serve`` uses."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=access_log,
        lifespan="on",
        ws="websockets-sansio",
        proxy_headers=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
