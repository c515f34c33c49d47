"""Sandbox networking on the real engine: no egress ever (installs go through kiln's npm proxy:
``test_npm_proxy``); sandboxes share one network yet reach neither each other nor the host's
services."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.abc
import docker
import docker.errors
import httpx
import pytest

from sandbox.containers.networks import (
    BRIDGE_NAME_OPTION,
    ICC_OPTION,
    bridge_interface,
    engine_filters_bridges,
    ensure_sandbox_network,
)
from sandbox.docker_boundary import call
from sandbox.errors import SandboxCapacity
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.settings import LABEL

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
# A raw TCP connection to an address and port (argv 1 and 2).
CONNECT_TO = (
    "const s = require('net').connect(+process.argv[2], process.argv[1]);"
    "s.setTimeout(1500, () => { console.log('error timeout'); process.exit(3) });"
    "s.on('connect', () => { console.log('connected'); process.exit(0) });"
    "s.on('error', e => { console.log('error', e.code); process.exit(3) })"
)
POOL_EXHAUSTED = (
    "could not find an available, non-overlapping IPv4 address pool among the defaults to "
    "assign to the network"
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


async def test_a_sandbox_resolves_and_reaches_nothing_outside(
    sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    code, output = await _node(docker_client, sandbox.container_id, RESOLVE_REGISTRY)
    assert (code, output.split()[0]) == (3, "error")
    # Not only DNS: an address the host reaches is unreachable from the sandbox.
    address = _registry_address()
    code, output = await _node(docker_client, sandbox.container_id, CONNECT_BY_ADDRESS, address)
    assert (code, output.split()[0]) == (3, "error")


@pytest.mark.parametrize(
    "network",
    [
        pytest.param("kiln-net-0123456789ab", id="sandbox-network"),
        pytest.param("kiln-sandboxes-test-1234abcd-reaper-99ff", id="long-instance-name"),
    ],
)
def test_bridge_interfaces_fit_linux_and_share_the_kiln_prefix(network: str) -> None:
    name = bridge_interface(network)
    assert len(name) <= 15
    assert name.startswith("kiln")
    assert name != bridge_interface(network + "x")


@pytest.fixture
async def two(manager: SandboxManager) -> AsyncIterator[tuple[Sandbox, Sandbox]]:
    """Two ready sandboxes of different owners, destroyed afterwards."""
    first = await manager.provision("vanilla", owner="owner-a", chat="chat-a")
    second = await manager.provision("vanilla", owner="owner-b", chat="chat-b")
    try:
        yield await manager.wait_ready(first.id), await manager.wait_ready(second.id)
    finally:
        await manager.destroy(first.id)
        await manager.destroy(second.id)


async def test_sandboxes_share_one_network_that_is_internal_without_icc_and_kiln_named(
    manager: SandboxManager, two: tuple[Sandbox, Sandbox], docker_client: docker.DockerClient
) -> None:
    name = manager.settings.network
    assert [sandbox.network for sandbox in two] == [name, name]
    for sandbox in two:
        attached = await _networks(docker_client, sandbox.container_id)
        assert attached == {name}
    attrs = docker_client.networks.get(name).attrs
    assert attrs["Internal"] is True
    assert attrs["Options"][ICC_OPTION] == "false"
    # A kiln<hash> bridge, so the host rule (-i kiln+) covers it.
    assert attrs["Options"][BRIDGE_NAME_OPTION] == bridge_interface(name)
    assert attrs["Labels"][LABEL] == "shared"


async def test_two_sandboxes_on_the_shared_network_cannot_reach_each_others_dev_server(
    two: tuple[Sandbox, Sandbox], docker_client: docker.DockerClient
) -> None:
    async with httpx.AsyncClient() as client:  # the host can: the preview proxy's path
        for sandbox in two:
            assert (await client.get(f"{sandbox.dev_url}/")).status_code == 200
    first, second = two
    for source, target in ((first, second), (second, first)):
        port = str(target.dev_port)
        code, output = await _node(docker_client, source.container_id, CONNECT_TO, target.ip, port)
        assert (code, output.split()[0]) == (3, "error")
    # The probe itself works: a sandbox reaches its own dev server.
    code, output = await _node(
        docker_client, first.container_id, CONNECT_TO, "127.0.0.1", str(first.dev_port)
    )
    assert (code, output) == (0, "connected")


async def test_a_sandbox_cannot_reach_a_service_listening_on_the_host(
    manager: SandboxManager, sandbox: Sandbox, docker_client: docker.DockerClient
) -> None:
    """The bridge's gateway is a host address: the host rule on kiln+ (scripts/setup.sh)."""
    attrs = docker_client.networks.get(manager.settings.network).attrs
    gateway = str(attrs["IPAM"]["Config"][0]["Gateway"])
    async with await anyio.create_tcp_listener(local_host="0.0.0.0") as listener:
        port = str(listener.extra(anyio.abc.SocketAttribute.local_port))
        async with anyio.create_task_group() as serve:
            serve.start_soon(listener.serve, _close)
            # The listener answers on that address from the host itself.
            await (await anyio.connect_tcp(gateway, int(port))).aclose()
            code, output = await _node(
                docker_client, sandbox.container_id, CONNECT_TO, gateway, port
            )
            serve.cancel_scope.cancel()
    assert (code, output.split()[0]) == (3, "error")


async def _close(stream: anyio.abc.SocketStream) -> None:
    await stream.aclose()


class _RefusingNetworks:
    """Docker's networks API on a host whose address pools are used up."""

    def get(self, name: str) -> Any:
        raise docker.errors.NotFound(f"network {name} not found")

    def create(self, name: str, **kwargs: Any) -> Any:
        raise docker.errors.APIError("400 Client Error", explanation=POOL_EXHAUSTED)


class _PoolExhaustedClient:
    networks = _RefusingNetworks()


async def test_an_exhausted_address_pool_is_sandbox_capacity_not_a_crash() -> None:
    client: Any = _PoolExhaustedClient()
    with pytest.raises(SandboxCapacity, match="non-overlapping IPv4 address pool") as caught:
        await ensure_sandbox_network(client, "kiln-sandboxes-x", "x")
    assert caught.value.code == "sandbox_capacity"


@pytest.mark.parametrize(
    ("info", "filtered"),
    [
        pytest.param({"BridgeNfIptables": True, "Warnings": None}, True, id="reported-on"),
        pytest.param({"BridgeNfIptables": False}, False, id="reported-off"),
        pytest.param(
            {"Warnings": ["WARNING: bridge-nf-call-iptables is disabled"]},
            False,
            id="newer-engine-warns",
        ),
        pytest.param(
            {"Warnings": ["WARNING: No swap limit support"]}, True, id="newer-engine-quiet"
        ),
    ],
)
def test_an_engine_says_whether_its_kernel_filters_bridged_traffic(
    info: dict[str, Any], filtered: bool
) -> None:
    """enable_icc=false is an iptables rule: without the filter sandboxes reach each other."""
    assert engine_filters_bridges(info) is filtered


async def test_this_engine_filters_bridged_traffic(docker_client: docker.DockerClient) -> None:
    """What the isolation tests above rely on, read as a swarm node's doctor line reads it."""
    assert engine_filters_bridges(await call(docker_client.info))
