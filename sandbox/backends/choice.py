"""Which backend an instance's sandboxes live on: ``KILN_SANDBOX_BACKEND``.

The known backends and the module each lives in are one table
(``sandbox.settings.SANDBOX_BACKENDS``); a value outside it is refused when the settings are
read, in words naming the value and the known ones. A known backend whose module is not part of
this installation (``swarm`` before it is wired in) is refused when the manager opens, in words
too: never a traceback. Each backend module offers
``async def open_backend(settings) -> SandboxBackend``.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import cast

from sandbox.backends.contract import SandboxBackend
from sandbox.errors import SandboxConfigError
from sandbox.settings import DEFAULT_BACKEND, SANDBOX_BACKENDS, SandboxSettings

BackendOpener = Callable[[SandboxSettings], Awaitable[SandboxBackend]]


def backend_opener(name: str) -> BackendOpener:
    """The ``open_backend`` of backend ``name``; ``SandboxConfigError`` in words when the name
    is unknown or its module is not installed."""
    module_name = SANDBOX_BACKENDS.get(name)
    if module_name is None:
        raise SandboxConfigError(
            f"KILN_SANDBOX_BACKEND={name!r} must be one of {', '.join(SANDBOX_BACKENDS)}"
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # the backend's own module is there, something it needs is not: a bug
        raise SandboxConfigError(
            f"KILN_SANDBOX_BACKEND={name!r}: the {name} sandbox backend is not part of this "
            f"kiln installation ({module_name} is missing); use "
            f"KILN_SANDBOX_BACKEND={DEFAULT_BACKEND!r}"
        ) from exc
    return cast(BackendOpener, module.open_backend)


async def open_backend(settings: SandboxSettings) -> SandboxBackend:
    """The backend ``settings.backend`` names, opened (its engine answered)."""
    return await backend_opener(settings.backend)(settings)
