"""Sandbox networking on the real engine: no egress outside installs, the registry during one."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import anyio
import docker
import pytest

from sandbox.containers.docker_boundary import call
from sandbox.containers.networks import bridge_interface, egress_attached
from sandbox.lifecycle.manager import Sandbox, SandboxManager

pytestmark = [pytest.mark.anyio, pytest.mark.docker]

# Resolve the registry's name with a short timeout; prints the addresses or the error code.
RESOLVE_REGISTRY = (
    "new (require('dns').promises.Resolver)({timeout: 1000, tries: 1})"
    ".resolve4('registry.npmjs.org')"
    ".then(a => console.log('resolved', a.join(',')))"
    ".catch(e => { console.log('error', e.code); process.exit(3) })"
)
# A raw TCP connection to an address, bypassing DNS.
CONNECT_BY_ADDRESS = (
    "const s = require('net').connect(443, process.argv[1]);"
    "s.setTimeout(1500, () => { console.log('error timeout'); process.exit(3) });"
    "s.on('connect', () => { console.log('connected'); process.exit(0) });"
    "s.on('error', e => { console.log('error', e.code); process.exit(3) })"
)


def _registry_address() -> str:
    """An address of the npm registry that the host itself can connect to."""
    address = str(socket.getaddrinfo("registry.npmjs.org", 443, socket.AF_INET)[0][4][0])
    socket.create_connection((address, 443), timeout=10).close()
    return address


async def _node(
    client: docker.DockerClient, container_id: str, script: str, *args: str
) -> tuple[int, str]:
    """Run a probe script as the sandbox user (the test's own tool, not the command policy)."""
    container = await call(client.containers.get, container_id)
    result = await call(container.exec_run, ["node", "-e", script, *args], user="1000:1000")
    return int(result.exit_code), str(result.output.decode().strip())


async def _networks(client: docker.DockerClient, container_id: str) -> set[str]:
    container = await call(client.containers.get, container_id)
    return set(container.attrs["NetworkSettings"]["Networks"])


@pytest.fixture
async def sandbox(manager: SandboxManager) -> AsyncIterator[Sandbox]:
    """A sandbox of its own chat, destroyed afterwards."""
    acquired = await manager.acquire("chat-networks", "owner-1", "vanilla")
    yield acquired
    await manager.destroy(acquired.id)


async def test_a_sandbox_resolves_and_reaches_nothing_outside_installs(
    sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    code, output = await _node(docker_client, sandbox.container_id, RESOLVE_REGISTRY)
    assert (code, output.split()[0]) == (3, "error")
    # Not only DNS: an address the host reaches is unreachable from the sandbox.
    address = _registry_address()
    code, output = await _node(docker_client, sandbox.container_id, CONNECT_BY_ADDRESS, address)
    assert (code, output.split()[0]) == (3, "error")


@pytest.mark.npm
async def test_the_npm_registry_is_reachable_during_an_install_and_not_after(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    seen: list[str] = []

    async def during_install(line: str) -> None:
        seen.append(line)
        # The install is running: the egress network is attached right now.
        attached = await _networks(docker_client, sandbox.container_id)
        seen.append("networks: " + ",".join(sorted(attached)))

    installed = await manager.install(sandbox.id, ["is-number@7.0.0"], during_install)
    assert installed.ok, installed.result.output
    assert any(manager.settings.egress_network in line for line in seen if line.startswith("net"))
    version = await _node(
        docker_client,
        sandbox.container_id,
        "console.log(require('/workspace/package.json').dependencies['is-number'])",
    )
    assert version == (0, "^7.0.0")
    assert await _networks(docker_client, sandbox.container_id) == {sandbox.network}
    address = _registry_address()
    code, _ = await _node(docker_client, sandbox.container_id, CONNECT_BY_ADDRESS, address)
    assert code == 3


@pytest.mark.npm
async def test_a_failing_install_still_detaches_egress(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    installed = await manager.install(sandbox.id, ["kiln-no-such-package-3f9a1c@1.0.0"])
    assert not installed.ok
    assert "404" in installed.result.output or "E404" in installed.result.output
    assert await _networks(docker_client, sandbox.container_id) == {sandbox.network}


async def test_a_cancelled_install_still_detaches_egress(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    settings = manager.settings
    with anyio.move_on_after(0.5) as scope:
        async with egress_attached(
            docker_client, settings.egress_network, settings.instance, sandbox.container_id
        ):
            assert settings.egress_network in await _networks(docker_client, sandbox.container_id)
            await anyio.sleep(30)
    assert scope.cancelled_caught
    assert await _networks(docker_client, sandbox.container_id) == {sandbox.network}


@pytest.mark.npm
async def test_the_egress_network_is_a_normal_bridge_without_inter_container_traffic(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    await manager.install(sandbox.id, ["is-number@7.0.0"])
    attrs = docker_client.networks.get(manager.settings.egress_network).attrs
    assert attrs["Internal"] is False
    assert attrs["Options"]["com.docker.network.bridge.enable_icc"] == "false"


@pytest.mark.parametrize(
    "network",
    [
        pytest.param("kiln-net-0123456789ab", id="sandbox-network"),
        pytest.param("kiln-egress-test-1234abcd-reaper-99ff", id="long-egress-name"),
    ],
)
def test_bridge_interfaces_fit_linux_and_share_the_kiln_prefix(network: str) -> None:
    name = bridge_interface(network)
    assert len(name) <= 15
    assert name.startswith("kiln")
    assert name != bridge_interface(network + "x")
