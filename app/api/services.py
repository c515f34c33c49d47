"""What every handler reaches through ``request.app.state.services``: one :class:`ApiServices`.

Handlers stay plain Starlette endpoints (``async def endpoint(request) -> Response``); the
services they need are built once by :func:`app.api.app.build_app` and hung on the app's state.
Store calls block (SQLite), so handlers go through :func:`in_thread`.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio.to_thread
from starlette.requests import HTTPConnection

from app.api.ports import RunServicePort, SandboxesPort, StorePort
from app.api.preview_seal import PreviewSeal
from app.api.stream_limits import StreamLimits

P = ParamSpec("P")
T = TypeVar("T")
HealthCheck = Callable[[], Awaitable[None]]

SESSION_TTL_SECONDS = 30 * 24 * 3600.0
PREVIEW_LOGIN_TTL_SECONDS = 120.0


@dataclass(frozen=True)
class ApiSettings:
    """The few settings the HTTP layer itself reads."""

    public_host: str = "kiln.localhost"
    public_port: int | None = 8000
    session_ttl: float = SESSION_TTL_SECONDS
    sse_ping_interval: float = 15.0
    max_event_streams_per_user: int = 20
    recordings_dir: Path | None = None
    # The environment the provider choice sees (server-wide keys, base URLs).
    provider_env: Mapping[str, str] = field(default_factory=dict)
    # Seals preview credentials (app.api.preview_seal). The service's secret makes them valid
    # in every process of a deployment; the default, a random one, in this process only.
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)


@dataclass(frozen=True)
class ApiServices:
    """The service objects handlers use."""

    store: StorePort
    runs: RunServicePort
    sandboxes: SandboxesPort
    settings: ApiSettings = field(default_factory=ApiSettings)
    health_checks: Mapping[str, HealthCheck] = field(default_factory=dict)
    streams: StreamLimits = field(default_factory=lambda: StreamLimits(20))
    # Set when the server begins to stop: event streams end then (they would hold the stop).
    stopping: anyio.Event | None = None

    @property
    def seal(self) -> PreviewSeal:
        """Seals and opens preview credentials with the settings' secret."""
        return _seal(self.settings.secret_key)


@functools.lru_cache(maxsize=4)
def _seal(secret: str) -> PreviewSeal:
    return PreviewSeal(secret)  # deriving the key costs an HKDF: once per secret


def services(connection: HTTPConnection) -> ApiServices:
    """The services of the app serving ``connection``."""
    found: ApiServices = connection.app.state.services
    return found


async def in_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking call (the store's) in a worker thread."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))
