"""Egress is a lease: a sandbox left on the egress network by a killed process loses it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import docker
import pytest

from sandbox.containers.docker_boundary import call
from sandbox.containers.networks import connect, ensure_egress_network
from sandbox.lifecycle.egress import HEARTBEAT_TTL_SECONDS
from sandbox.lifecycle.manager import Sandbox, SandboxManager

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.redis]
ROOT = Path(__file__).resolve().parents[3]


async def networks_of(client: docker.DockerClient, container_id: str) -> set[str]:
    """The networks a container is attached to now."""
    container = await call(client.containers.get, container_id)
    return set(container.attrs["NetworkSettings"]["Networks"])


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    acquired = await manager.acquire("chat-egress-lease", "owner-1", "vanilla")
    try:
        yield acquired
    finally:
        await manager.destroy(acquired.id)


async def test_a_sandbox_on_the_egress_network_without_a_lease_is_disconnected(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    settings = manager.settings
    await ensure_egress_network(docker_client, settings.egress_network, settings.instance)
    await connect(docker_client, settings.egress_network, sandbox.container_id)
    assert settings.egress_network in await networks_of(docker_client, sandbox.container_id)
    assert await manager.reconcile_egress() == (sandbox.container_id,)
    assert settings.egress_network not in await networks_of(docker_client, sandbox.container_id)


async def test_a_live_lease_keeps_the_install_online(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    async with manager._egress(sandbox.id):
        assert await manager.reconcile_egress() == ()
        networks = await networks_of(docker_client, sandbox.container_id)
        assert manager.settings.egress_network in networks
    # ...and past its deadline it is not live any more, owner alive or not.
    await manager.egress_leases.grant(sandbox.container_id, time.time() - 1)
    assert await manager.egress_leases.live(time.time()) == set()


async def test_kill_9_during_an_install_loses_egress_within_the_reconciler_period(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient, redis_url: str
) -> None:
    """The holder's ``finally`` never runs; its heartbeat expires and the lease dies with it."""
    settings = manager.settings
    argv = [sys.executable, "-m", "tests.sandbox.lifecycle.egress_holder"]
    holder = subprocess.Popen(
        [*argv, settings.instance, redis_url, sandbox.id], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        line = await anyio.to_thread.run_sync(holder.stdout.readline)
        assert line.strip() == b"attached", line
        assert await manager.reconcile_egress() == ()  # its owner is alive: the lease holds
        holder.kill()
        holder.wait()
        attached = await networks_of(docker_client, sandbox.container_id)
        assert settings.egress_network in attached  # the finally did not run
        with anyio.fail_after(HEARTBEAT_TTL_SECONDS * 4):
            while await manager.reconcile_egress() != (sandbox.container_id,):
                await anyio.sleep(0.5)
        attached = await networks_of(docker_client, sandbox.container_id)
        assert settings.egress_network not in attached
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
