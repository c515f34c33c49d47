"""Provisioning building blocks against the real engine: readiness, idempotent removal."""

from __future__ import annotations

import docker
import pytest

from sandbox.containers.networks import remove_network
from sandbox.containers.provisioning import remove_container, remove_volume, wait_port_open
from sandbox.errors import SandboxUnavailable
from sandbox.lifecycle.manager import SandboxManager

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


async def test_waiting_for_a_dev_server_fails_early_when_the_container_stops(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await manager.provision("vanilla")
    try:
        docker_client.containers.get(sandbox.container_id).kill()
        with pytest.raises(SandboxUnavailable, match="stopped before its dev server"):
            # A port nothing listens on: only the stopped container can end the wait early.
            await wait_port_open(docker_client, sandbox.container_id, sandbox.ip, 9, timeout=600)
    finally:
        await manager.destroy(sandbox.id)


async def test_waiting_for_a_port_that_never_opens_times_out(
    manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    sandbox = await manager.provision("vanilla")
    try:
        with pytest.raises(SandboxUnavailable, match=r"did not listen within 0\.5s"):
            await wait_port_open(docker_client, sandbox.container_id, sandbox.ip, 9, timeout=0.5)
    finally:
        await manager.destroy(sandbox.id)


@pytest.mark.parametrize(
    "remove",
    [
        pytest.param(remove_container, id="container"),
        pytest.param(remove_network, id="network"),
        pytest.param(remove_volume, id="volume"),
    ],
)
async def test_removing_what_is_already_gone_is_harmless(
    docker_client: docker.DockerClient, remove: object
) -> None:
    assert callable(remove)
    assert await remove(docker_client, "kiln-test-never-existed") is False
