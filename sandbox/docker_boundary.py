"""The one place kiln calls the Docker SDK: in a worker thread, with errors wrapped.

The SDK blocks, so every call goes through :func:`call`, which runs it with
``anyio.to_thread.run_sync`` and turns ``docker.errors`` into kiln's sandbox exceptions: an
engine that does not answer is :class:`DockerUnavailable`, and the refusals a user can meet on a
busy host are told apart by Docker's own words (:data:`REFUSALS`), so they reach the user with
their own code instead of a generic failure.

A wedged engine (its socket accepts and never answers) would hold every call for the client's
whole timeout (:data:`CLIENT_TIMEOUT_SECONDS`, long because image builds and commands take that
long). Each call therefore also has a deadline by its kind (:func:`call_deadline`): a look-up
(get, list, inspect, ping) is answered in well under a second by a live engine and gets
:attr:`CallTimeouts.quick`; a change (create, start, remove, connect) gets
:attr:`CallTimeouts.change`; builds, execs, archives and anything not named keep only their own
limits. A call past its deadline is ``DockerUnavailable``; its thread is abandoned and ends at
the client's timeout.

Threads are shared fairly: a call made for a user (:func:`docker_tenant`: the API binds the
request's user, a worker the run's) takes a token of that user's share (:data:`TENANT_THREADS`)
and of the users' pool (:data:`TENANTS_THREADS`) before one of the :data:`DOCKER_THREADS`. One
user's twenty restores or huge workspace wait for each other, never for another user's calls,
and kiln's own calls (``/healthz``, the reaper) always find a thread.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Generic, ParamSpec, TypeVar

import anyio
import anyio.to_thread
import docker
import docker.errors
import requests.exceptions
from anyio.lowlevel import RunVar

from sandbox.errors import (
    DiskFull,
    DiskQuotaExceeded,
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
TENANT_THREADS = 5  # one user's share of them
TENANTS_THREADS = 16  # every user's calls together: the rest is kiln's own (health, reaper)
_TENANT: ContextVar[str | None] = ContextVar("kiln_docker_tenant", default=None)
# tenant -> [its limiter, calls holding or waiting for it]; dropped when unused. Per loop.
_TENANT_SHARES: RunVar[dict[str, tuple[anyio.CapacityLimiter, list[int]]]] = RunVar(
    "kiln_docker_tenant_shares"
)
_TENANTS_POOL: RunVar[anyio.CapacityLimiter] = RunVar("kiln_docker_tenants_pool")
CLIENT_TIMEOUT_SECONDS = 120.0  # the SDK client's own, per request: builds and execs need it

# The SDK's method names (``fn.__name__``) by kind. Anything else (build, exec_run, exec_start,
# put_archive, pull, wait, logs, kiln's own helpers) has no deadline beyond its own limits.
QUICK_CALLS = frozenset({"ping", "version", "info", "get", "list", "reload", "exec_inspect"})
QUICK_PREFIXES = ("inspect_",)
CHANGE_CALLS = frozenset(
    {"create", "start", "stop", "kill", "restart", "remove", "connect", "disconnect", "tag"}
)
CHANGE_PREFIXES = ("create_", "remove_")


@dataclass(frozen=True)
class CallTimeouts:
    """Deadlines of Docker calls by kind, in seconds (``KILN_DOCKER_QUICK_TIMEOUT``,
    ``KILN_DOCKER_CHANGE_TIMEOUT``; see :class:`sandbox.settings.SandboxSettings`)."""

    quick: float = 10.0
    change: float = 60.0


_timeouts = CallTimeouts()


def set_call_timeouts(timeouts: CallTimeouts) -> None:
    """Use ``timeouts`` for every later :func:`call` of this process. Module state on purpose:
    ``call`` is used by dozens of functions that get a client, not the settings, and a process
    has one set of settings (the manager sets them when it opens)."""
    global _timeouts
    _timeouts = timeouts


def call_timeouts() -> CallTimeouts:
    """The deadlines :func:`call` uses now."""
    return _timeouts


def call_deadline(fn: Callable[..., object], timeouts: CallTimeouts) -> float | None:
    """The deadline of a call of ``fn`` by its kind (see the module docstring); ``None``: none."""
    name = getattr(fn, "__name__", "")
    if name in QUICK_CALLS or name.startswith(QUICK_PREFIXES):
        return timeouts.quick
    if name in CHANGE_CALLS or name.startswith(CHANGE_PREFIXES):
        return timeouts.change
    return None


# Docker's explanation (lower-cased) -> the exception it becomes. Docker says so in these words.
REFUSALS: tuple[tuple[str, type[SandboxError]], ...] = (
    # Every default address pool is used up: one more bridge network does not fit.
    ("could not find an available, non-overlapping ipv4 address pool", SandboxCapacity),
    ("no available network", SandboxCapacity),
    # The shared network's subnet has no address left for another container.
    ("no available addresses on this pool", SandboxCapacity),
    ("no space left on device", DiskFull),
    # The sandbox's own quota (sandbox.containers.disk_quota), when Docker writes into it.
    ("disk quota exceeded", DiskQuotaExceeded),
)


async def call(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking Docker SDK call in a thread; wrap its errors at this boundary.

    The threads come from a limiter of their own (:func:`docker_threads`), and a cancelled
    caller does not wait for its thread: an engine that accepts connections and never answers
    holds each call for the client's whole timeout, and those threads must neither take the
    ones the store's reads need (every API request) nor hold up a stop, a deadline or
    ``/healthz``. The abandoned thread ends by itself at the client's timeout. A call past
    its deadline (:func:`call_deadline`) raises ``DockerUnavailable``; waiting for the user's
    own share (see the module docstring) does not count against it."""
    return await _in_thread(fn, functools.partial(run_wrapped, fn, *args, **kwargs))


async def call_owned(
    release: Callable[[T], object], fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    """:func:`call` for a result that holds a connection (an exec's output stream or socket):
    it is the caller's once returned; if the caller left first (cancelled, or past the
    deadline), whichever side sees the result last releases it with ``release``, so an
    abandoned thread's connection is never left to the garbage collector."""
    handover = _Handover(release)
    try:
        return await _in_thread(fn, functools.partial(handover.run, fn, *args, **kwargs))
    except BaseException:
        handover.caller_left()
        raise


class _Handover(Generic[T]):
    """Who owns a call's result: the caller, or nobody (then it is released). A lock decides,
    so the result is neither leaked nor released twice."""

    def __init__(self, release: Callable[[T], object]) -> None:
        self._release, self._lock = release, threading.Lock()
        self._left = False
        self._result: list[T] = []

    def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """In the thread: run the call; release its result if the caller already left."""
        result = run_wrapped(fn, *args, **kwargs)
        with self._lock:
            if not self._left:
                self._result.append(result)
                return result
        self._release_quietly(result)
        return result

    def caller_left(self) -> None:
        """In the caller, which is leaving: release a result that came meanwhile."""
        with self._lock:
            self._left = True
            results, self._result = self._result, []
        for result in results:
            self._release_quietly(result)

    def _release_quietly(self, result: T) -> None:
        # Nobody is left to tell: a connection the engine already closed is just as released.
        with suppress(Exception):
            self._release(result)


async def _in_thread(fn: Callable[..., object], run: Callable[[], T]) -> T:
    """``run`` in a Docker thread under the tenant's share and ``fn``'s deadline."""
    deadline = call_deadline(fn, _timeouts)
    async with _tenant_share(_TENANT.get()):
        with anyio.move_on_after(deadline if deadline is not None else float("inf")):
            return await anyio.to_thread.run_sync(
                run, abandon_on_cancel=True, limiter=docker_threads()
            )
    name = getattr(fn, "__qualname__", repr(fn))
    raise DockerUnavailable(f"docker: engine did not answer {name} within {deadline:g} s")


@contextmanager
def docker_tenant(tenant: str | None) -> Iterator[None]:
    """Count the Docker calls of this task (and of the tasks it starts) against ``tenant``'s
    share of the threads (``None``: kiln's own calls)."""
    token = _TENANT.set(tenant)
    try:
        yield
    finally:
        _TENANT.reset(token)


def bind_docker_tenant(tenant: str | None) -> None:
    """:func:`docker_tenant` for the rest of the current task (an API request's handler)."""
    _TENANT.set(tenant)


@asynccontextmanager
async def _tenant_share(tenant: str | None) -> AsyncIterator[None]:
    """Hold a token of ``tenant``'s share and of the users' pool (nothing for kiln's own)."""
    if tenant is None:
        yield
        return
    shares = _run_var(_TENANT_SHARES, dict)
    limiter, users = shares.setdefault(tenant, (anyio.CapacityLimiter(TENANT_THREADS), [0]))
    users[0] += 1
    try:
        async with limiter, _run_var(_TENANTS_POOL, _tenants_pool):
            yield
    finally:
        users[0] -= 1
        if not users[0]:
            del shares[tenant]


def _tenants_pool() -> anyio.CapacityLimiter:
    return anyio.CapacityLimiter(TENANTS_THREADS)


def _run_var(var: RunVar[T], make: Callable[[], T]) -> T:
    """``var``'s value in this event loop, made on first use."""
    try:
        return var.get()
    except LookupError:
        value = make()
        var.set(value)
        return value


def docker_threads() -> anyio.CapacityLimiter:
    """The event loop's limiter of threads blocked in the Docker SDK (one per loop, as anyio's
    own default limiter)."""
    return _run_var(_DOCKER_THREADS, functools.partial(anyio.CapacityLimiter, DOCKER_THREADS))


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


def connect(url: str | None = None) -> docker.DockerClient:
    """A Docker client of the engine at ``url``, else from the environment (``DOCKER_HOST``
    or the local socket)."""
    environment = None if url is None else {**os.environ, "DOCKER_HOST": url}
    try:
        client = docker.from_env(environment=environment, timeout=CLIENT_TIMEOUT_SECONDS)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise DockerUnavailable(f"docker: cannot reach the engine: {exc!s}") from exc
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        client.close()  # its connection pool would be left to the garbage collector
        raise DockerUnavailable(f"docker: cannot reach the engine: {exc!s}") from exc
    return client
