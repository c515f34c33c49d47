"""The one place kiln calls the Docker SDK: in a worker thread, with errors wrapped.

The SDK blocks, so every call goes through :func:`call`, which runs it with
``anyio.to_thread.run_sync`` and turns ``docker.errors`` into kiln's sandbox exceptions: an
engine that does not answer is :class:`DockerUnavailable`, and the refusals a user can meet on a
busy host are told apart by Docker's own words (:data:`REFUSALS`), so they reach the user with
their own code instead of a generic failure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio
import anyio.to_thread
import docker
import docker.errors
import requests.exceptions
from anyio.lowlevel import RunVar

from sandbox.errors import (
    DiskFull,
    DockerUnavailable,
    SandboxCapacity,
    SandboxError,
    SandboxNotFound,
)

P = ParamSpec("P")
T = TypeVar("T")
# Half of anyio's default 40 threads: Docker calls wait for each other past this, the store's
# reads (anyio's default limiter) never wait for Docker.
DOCKER_THREADS = 20
_DOCKER_THREADS: RunVar[anyio.CapacityLimiter] = RunVar("kiln_docker_threads")

# Docker's explanation (lower-cased) -> the exception it becomes. Docker says so in these words.
REFUSALS: tuple[tuple[str, type[SandboxError]], ...] = (
    # Every default address pool is used up: one more bridge network does not fit.
    ("could not find an available, non-overlapping ipv4 address pool", SandboxCapacity),
    ("no available network", SandboxCapacity),
    # The shared network's subnet has no address left for another container.
    ("no available addresses on this pool", SandboxCapacity),
    ("no space left on device", DiskFull),
)


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking Docker SDK call in a thread; wrap its errors at this boundary.

    The threads come from a limiter of their own (:func:`docker_threads`), and a cancelled
    caller does not wait for its thread: an engine that accepts connections and never answers
    holds each call for the client's whole timeout, and those threads must neither take the
    ones the store's reads need (every API request) nor hold up a stop, a deadline or
    ``/healthz``. The abandoned thread ends by itself at the client's timeout."""
    return await anyio.to_thread.run_sync(
        functools.partial(run_wrapped, fn, *args, **kwargs),
        abandon_on_cancel=True,
        limiter=docker_threads(),
    )


def docker_threads() -> anyio.CapacityLimiter:
    """The event loop's limiter of threads blocked in the Docker SDK (one per loop, as anyio's
    own default limiter)."""
    try:
        return _DOCKER_THREADS.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(DOCKER_THREADS)
        _DOCKER_THREADS.set(limiter)
        return limiter


def run_wrapped(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a Docker SDK call in the current thread with its errors wrapped."""
    name = getattr(fn, "__qualname__", repr(fn))
    try:
        return fn(*args, **kwargs)
    except docker.errors.NotFound as exc:
        raise SandboxNotFound(f"docker: not found in {name}: {exc.explanation!r}") from exc
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        if isinstance(exc, docker.errors.APIError):
            kind = refusal_kind(str(exc.explanation or ""))
            raise kind(f"docker: {name} failed: {exc.explanation!r}") from exc
        raise DockerUnavailable(f"docker: engine unreachable in {name}: {exc!s}") from exc


def refusal_kind(explanation: str) -> type[SandboxError]:
    """The exception class of a Docker API error, from its explanation (:data:`REFUSALS`)."""
    lowered = explanation.lower()
    return next((kind for words, kind in REFUSALS if words in lowered), SandboxError)


def connect() -> docker.DockerClient:
    """A Docker client from the environment (``DOCKER_HOST`` or the local socket)."""
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerUnavailable(f"docker: cannot reach the engine: {exc!s}") from exc
    return client
