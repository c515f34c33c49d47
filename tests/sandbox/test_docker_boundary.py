"""The Docker boundary: SDK errors become kiln's exceptions, refusals a user can meet by name."""

from __future__ import annotations

import functools
import threading

import anyio
import anyio.to_thread
import docker.errors
import pytest
import requests.exceptions

from sandbox.docker_boundary import (
    DOCKER_THREADS,
    TENANT_THREADS,
    TENANTS_THREADS,
    CallTimeouts,
    _Handover,
    call,
    call_deadline,
    call_owned,
    call_timeouts,
    docker_tenant,
    docker_threads,
    run_wrapped,
    set_call_timeouts,
)
from sandbox.errors import (
    DiskFull,
    DiskQuotaExceeded,
    DockerUnavailable,
    SandboxCapacity,
    SandboxError,
    SandboxNotFound,
)

HUNG_CALL_LIMIT_SECONDS = 10.0
POOL_EXHAUSTED = (
    "could not find an available, non-overlapping IPv4 address pool among the defaults to "
    "assign to the network"
)


def _raising(exc: BaseException) -> object:
    def fail() -> None:
        raise exc

    return fail


@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        pytest.param(
            docker.errors.APIError("400", explanation=POOL_EXHAUSTED),
            SandboxCapacity,
            "sandbox_capacity",
            id="address-pools-used-up",
        ),
        pytest.param(
            docker.errors.APIError("500", explanation="no available addresses on this pool"),
            SandboxCapacity,
            "sandbox_capacity",
            id="network-full",
        ),
        pytest.param(
            docker.errors.APIError(
                "500", explanation="mkdir /var/lib/docker/x: no space left on device"
            ),
            DiskFull,
            "disk_full",
            id="disk-full",
        ),
        pytest.param(
            docker.errors.APIError(
                "500",
                explanation="Error processing tar file: mkdir /workspace/src: disk quota exceeded",
            ),
            DiskQuotaExceeded,
            "disk_quota_exceeded",
            id="sandbox-quota",
        ),
        pytest.param(
            docker.errors.APIError("409", explanation="Conflict. The container name is in use"),
            SandboxError,
            "sandbox_error",
            id="other-refusal",
        ),
        pytest.param(
            docker.errors.NotFound("404", explanation="No such container: x"),
            SandboxNotFound,
            "sandbox_not_found",
            id="not-found",
        ),
        pytest.param(
            requests.exceptions.ConnectionError("('Connection aborted.', FileNotFoundError(2))"),
            DockerUnavailable,
            "docker_unavailable",
            id="engine-down",
        ),
        pytest.param(
            requests.exceptions.ReadTimeout("read timed out (120s)"),
            DockerUnavailable,
            "docker_unavailable",
            id="engine-stuck",
        ),
        pytest.param(
            docker.errors.DockerException("Error while fetching server API version"),
            DockerUnavailable,
            "docker_unavailable",
            id="no-engine-at-all",
        ),
    ],
)
def test_docker_errors_are_wrapped_by_what_they_mean(
    error: BaseException, kind: type[SandboxError], code: str
) -> None:
    with pytest.raises(kind) as caught:
        run_wrapped(_raising(error))  # type: ignore[arg-type]
    assert type(caught.value) is kind
    assert caught.value.code == code
    assert caught.value.__cause__ is error


@pytest.mark.anyio
async def test_a_hung_call_takes_a_docker_thread_and_its_caller_can_give_up() -> None:
    """An engine that never answers: the waiting call holds a token of the Docker limiter, not
    of anyio's default one (which the store's reads use), and cancelling the caller returns at
    once instead of waiting for the SDK's timeout (the thread ends by itself later)."""
    release = threading.Event()
    default = anyio.to_thread.current_default_thread_limiter()
    safety = threading.Timer(HUNG_CALL_LIMIT_SECONDS * 2, release.set)  # never hang the suite
    safety.start()
    try:
        with anyio.fail_after(HUNG_CALL_LIMIT_SECONDS):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call, release.wait)
                while docker_threads().borrowed_tokens == 0:
                    await anyio.sleep(0.01)
                assert default.borrowed_tokens == 0
                tasks.cancel_scope.cancel()  # returns although the thread still waits
        assert not release.is_set()
        assert docker_threads().total_tokens == DOCKER_THREADS
    finally:
        release.set()
        safety.cancel()


async def _call_as(tenant: str | None, fn: object) -> None:
    with docker_tenant(tenant):
        await call(fn)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_one_user_takes_at_most_a_share_of_the_docker_threads() -> None:
    """Twenty hung calls of one user hold a share of the threads; another user's calls and
    kiln's own (``/healthz``) are answered meanwhile; users together leave kiln a few."""
    release = threading.Event()
    safety = threading.Timer(HUNG_CALL_LIMIT_SECONDS * 2, release.set)  # never hang the suite
    safety.start()
    try:
        with anyio.fail_after(HUNG_CALL_LIMIT_SECONDS):
            async with anyio.create_task_group() as tasks:
                for _ in range(20):
                    tasks.start_soon(_call_as, "greedy", release.wait)
                while docker_threads().borrowed_tokens < TENANT_THREADS:
                    await anyio.sleep(0.01)
                await _call_as("other", lambda: None)  # answered while greedy's calls wait
                await _call_as(None, lambda: None)
                assert docker_threads().borrowed_tokens == TENANT_THREADS
                for n in range(TENANTS_THREADS):  # every user busy: kiln's own still go through
                    tasks.start_soon(_call_as, f"user{n}", release.wait)
                while docker_threads().borrowed_tokens < TENANTS_THREADS:
                    await anyio.sleep(0.01)
                await _call_as(None, lambda: None)
                assert docker_threads().borrowed_tokens == TENANTS_THREADS < DOCKER_THREADS
                release.set()
    finally:
        release.set()
        safety.cancel()


def _named(name: str) -> object:
    """A stand-in for an SDK method called ``name``."""

    def method() -> None:
        """Does nothing."""

    method.__name__ = name
    return method


TIMEOUTS = CallTimeouts(quick=7.0, change=40.0)


@pytest.mark.parametrize(
    ("name", "deadline"),
    [
        ("ping", 7.0),
        ("get", 7.0),
        ("list", 7.0),
        ("reload", 7.0),
        ("exec_inspect", 7.0),
        ("inspect_container", 7.0),
        ("create", 40.0),
        ("start", 40.0),
        ("remove", 40.0),
        ("connect", 40.0),
        ("create_container", 40.0),
        # Builds, commands, archives and kiln's own helpers keep their own, longer limits.
        ("build", None),
        ("exec_run", None),
        ("exec_start", None),
        ("put_archive", None),
        ("wait", None),
        ("image_state", None),
    ],
)
def test_each_kind_of_call_has_its_deadline(name: str, deadline: float | None) -> None:
    assert call_deadline(_named(name), TIMEOUTS) == deadline  # type: ignore[arg-type]


def test_a_partial_or_lambda_has_no_deadline() -> None:
    assert call_deadline(lambda: None, TIMEOUTS) is None
    assert call_deadline(functools.partial(print, "x"), TIMEOUTS) is None


@pytest.mark.anyio
async def test_a_look_up_past_its_deadline_is_docker_unavailable() -> None:
    """A wedged engine: a quick call gives up at its deadline, in words, not at the client's
    timeout (the thread is abandoned and ends later)."""
    release = threading.Event()
    safety = threading.Timer(HUNG_CALL_LIMIT_SECONDS * 2, release.set)  # never hang the suite
    safety.start()
    before = call_timeouts()
    set_call_timeouts(CallTimeouts(quick=0.05, change=0.05))
    try:

        def get() -> None:
            """Waits as a hung ``containers.get`` would."""
            release.wait()

        with anyio.fail_after(HUNG_CALL_LIMIT_SECONDS), pytest.raises(DockerUnavailable) as caught:
            await call(get)
        assert "did not answer" in str(caught.value)
        assert caught.value.code == "docker_unavailable"
    finally:
        set_call_timeouts(before)
        release.set()
        safety.cancel()


class _Connection:
    """A stand-in result that holds a connection: released once at most."""

    def __init__(self) -> None:
        self.releases = 0

    def release(self) -> None:
        self.releases += 1


def _release(connection: _Connection) -> None:
    connection.release()


@pytest.mark.anyio
async def test_a_connection_made_after_its_caller_left_is_released_by_the_thread() -> None:
    made = _Connection()
    started, proceed, returned = threading.Event(), threading.Event(), threading.Event()

    def exec_start() -> _Connection:
        started.set()
        proceed.wait(HUNG_CALL_LIMIT_SECONDS)
        returned.set()
        return made

    with anyio.fail_after(HUNG_CALL_LIMIT_SECONDS):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(call_owned, _release, exec_start)
            # This call's own thread, not a token another test's abandoned thread still holds
            # (a cancel before the thread starts would leave nothing to release).
            while not started.is_set():
                await anyio.sleep(0.01)
            assert docker_threads().borrowed_tokens >= 1
            tasks.cancel_scope.cancel()  # the caller leaves while the engine still answers
        proceed.set()
        while made.releases == 0:
            await anyio.sleep(0.01)
    assert returned.is_set()
    assert made.releases == 1


@pytest.mark.anyio
async def test_a_connection_handed_over_as_the_caller_leaves_is_released_by_the_caller() -> None:
    made = _Connection()

    def exec_start() -> _Connection:
        return made

    handover = _Handover(_release)
    handover.run(exec_start)  # the thread finished: its result waits for the caller
    handover.caller_left()  # ... who was cancelled before it could take it
    assert made.releases == 1
    handover.caller_left()
    assert made.releases == 1  # never twice


@pytest.mark.anyio
async def test_a_connection_the_caller_got_is_the_callers() -> None:
    made = _Connection()
    assert await call_owned(_release, lambda: made) is made
    assert made.releases == 0


@pytest.mark.anyio
async def test_a_failed_owned_call_keeps_its_name_and_releases_nothing() -> None:
    def exec_start() -> _Connection:
        raise docker.errors.APIError("500", explanation="no such exec")

    with pytest.raises(SandboxError, match="exec_start") as caught:
        await call_owned(_release, exec_start)
    assert "no such exec" in str(caught.value)
