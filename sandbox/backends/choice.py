"""Which backend an instance's sandboxes live on: ``KILN_SANDBOX_BACKEND``.

The known backends and the module each lives in are one table
(``sandbox.settings.SANDBOX_BACKENDS``: ``docker``, the one engine kiln runs beside, and
``swarm``, a Docker Swarm's nodes); a value outside it is refused when the settings are read,
and here, in words naming the value and the known ones. Each backend module offers
``async def open_backend(settings) -> SandboxBackend``.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import cast

from sandbox.backends.contract import SandboxBackend
from sandbox.errors import SandboxConfigError
from sandbox.settings import SANDBOX_BACKENDS, SandboxSettings

BackendOpener = Callable[[SandboxSettings], Awaitable[SandboxBackend]]


def backend_opener(name: str) -> BackendOpener:
    """The ``open_backend`` of backend ``name``; ``SandboxConfigError`` in words when the name
    is unknown."""
    module_name = SANDBOX_BACKENDS.get(name)
    if module_name is None:
        raise SandboxConfigError(
            f"KILN_SANDBOX_BACKEND={name!r} must be one of {', '.join(SANDBOX_BACKENDS)}"
        )
    module = importlib.import_module(module_name)
    return cast(BackendOpener, module.open_backend)


async def open_backend(settings: SandboxSettings) -> SandboxBackend:
    """The backend ``settings.backend`` names, opened (its engine answered)."""
    return await backend_opener(settings.backend)(settings)
