"""The one place kiln calls the Docker SDK: in a worker thread, with errors wrapped.

The SDK blocks, so every call goes through :func:`call`, which runs it with
``anyio.to_thread.run_sync`` and turns ``docker.errors`` into kiln's sandbox exceptions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread
import docker
import docker.errors
import requests.exceptions

from sandbox.errors import SandboxError, SandboxNotFound, SandboxUnavailable

P = ParamSpec("P")
T = TypeVar("T")


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking Docker SDK call in a thread; wrap its errors at this boundary."""
    return await anyio.to_thread.run_sync(functools.partial(run_wrapped, fn, *args, **kwargs))


def run_wrapped(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a Docker SDK call in the current thread with its errors wrapped."""
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        return fn(*args, **kwargs)
    except docker.errors.NotFound as exc:
        raise SandboxNotFound(f"docker: not found in {name}: {exc.explanation!r}") from exc
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        if isinstance(exc, docker.errors.APIError):
            raise SandboxError(f"docker: {name} failed: {exc.explanation!r}") from exc
        raise SandboxUnavailable(f"docker: engine unreachable in {name}: {exc!s}") from exc


def connect() -> docker.DockerClient:
    """A Docker client from the environment (``DOCKER_HOST`` or the local socket)."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.ConnectionError) as exc:
        raise SandboxUnavailable(f"docker: cannot reach the engine: {exc!s}") from exc
    return client
