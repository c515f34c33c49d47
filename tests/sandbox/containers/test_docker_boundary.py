"""The Docker boundary: SDK errors become kiln's exceptions, refusals a user can meet by name."""

from __future__ import annotations

import docker.errors
import pytest
import requests.exceptions

from sandbox.containers.docker_boundary import run_wrapped
from sandbox.errors import (
    DiskFull,
    DockerUnavailable,
    SandboxCapacity,
    SandboxError,
    SandboxNotFound,
)

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
