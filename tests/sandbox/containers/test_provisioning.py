"""Provisioning building blocks against the real engine: readiness, idempotent removal."""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

import anyio
import docker
import pytest
from docker.models.containers import ContainerCollection

from sandbox.containers.labels import container_name, volume_name
from sandbox.containers.networks import remove_network
from sandbox.containers.provisioning import remove_container, remove_volume, wait_port_open
from sandbox.errors import SandboxUnavailable
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import LABEL
from tests.sandbox.docker_support import TestInstances

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


async def test_a_volume_goes_with_a_container_created_on_it_after_the_removal_began(
    docker_client: docker.DockerClient, instances: TestInstances
) -> None:
    """A provision stopped halfway may see its container created after it looked for it: the
    volume's removal takes that container with it, instead of failing "volume is in use"."""
    name = f"kiln-test-late-{secrets.token_hex(4)}"
    labels = {LABEL: "late-container", "kiln.instance": instances.main}
    docker_client.volumes.create(name, labels=labels)
    container = docker_client.containers.create(
        "kiln/sandbox-vanilla:latest", volumes={name: {"bind": "/workspace"}}, labels=labels
    )
    assert await remove_volume(docker_client, name) is True
    assert docker_client.volumes.list(filters={"name": name}) == []
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(container.id)


async def test_a_provision_cancelled_during_its_create_leaves_nothing_behind(
    manager: SandboxManager, docker_client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kiln stopping while the warm pool fills: the create is waited for, so the clean-up finds
    the container (and its volume is not made again by a create landing after it)."""
    created: list[str] = []
    creating, landed = threading.Event(), threading.Event()
    real_create = ContainerCollection.create

    def create(self: ContainerCollection, *args: Any, **kwargs: Any) -> Any:
        creating.set()
        time.sleep(0.5)  # a busy engine
        try:
            return real_create(self, *args, **kwargs)
        finally:
            created.append(kwargs["name"])
            landed.set()

    monkeypatch.setattr(ContainerCollection, "create", create)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(manager.provision, "vanilla")
            await anyio.to_thread.run_sync(creating.wait)
            scope.cancel()
    await anyio.to_thread.run_sync(landed.wait, 30.0)
    monkeypatch.undo()
    assert created, "the create ran"
    assert docker_client.containers.list(all=True, filters={"name": created[0]}) == []
    volume = volume_name(created[0].removeprefix(container_name("")))
    assert docker_client.volumes.list(filters={"name": volume}) == []
