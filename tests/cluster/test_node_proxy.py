"""sandbox.cluster.node_proxy on real swarm nodes: kiln's images reach the nodes through
sandbox.cluster.image_distribution, each node that holds a sandbox runs the npm proxy on its
bridge's gateway (one registry address for all), an install in a sandbox on each of two nodes goes
through its own node's proxy (only that node's cache gets the package), and a sandbox reaches
nothing of another node nor the nodes' way out."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass

import anyio
import docker
import pytest

from sandbox.cluster.image_distribution import ensure_images_on_nodes
from sandbox.cluster.networks import (
    ensure_isolated_network,
    remove_isolated_network,
    subnet_gateway,
)
from sandbox.cluster.node_proxy import ensure_node_proxy, node_registry_url
from sandbox.cluster.placement import (
    Placement,
    create_sandbox_service,
    node_engine,
    remove_sandbox_service,
    remove_workspace_volume,
    wait_for_placement,
)
from sandbox.cluster.service_spec import sandbox_service_kwargs
from sandbox.containers.labels import volume_name
from sandbox.containers.npm_proxy import STORAGE_PATH, proxy_container_name, remove_proxy
from sandbox.execution.install_queue import install_argv, npm_argv
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import get_template
from sandbox.settings import SandboxSettings
from tests.cluster.forward_proxy import ForwardProxy, forward_proxy
from tests.cluster.nodes import Cluster
from tests.sandbox.docker_support import CA_BUNDLE

pytestmark = pytest.mark.anyio
TEMPLATE = get_template("vanilla")
# Loaded by sandbox.cluster.image_distribution in the `images` fixture (what is under test),
# not by the cluster fixture.
CLUSTER_IMAGES: tuple[str, ...] = ()
PLACEMENT_TIMEOUT = 60.0
# The nodes' common sandbox subnet: clear of the swarm's pool (10.213/16) and the nodes' own.
SUBNET = "10.214.0.0/24"
# Two small packages without dependencies: one per node, so each cache tells whose install it saw.
PACKAGES = ("is-number@7.0.0", "escape-html@1.0.3")
CONNECT_TO = (
    "const s=require('net').connect(+process.argv[2],process.argv[1]);"
    "s.setTimeout(1500,()=>{console.log('error timeout');process.exit(3)});"
    "s.on('connect',()=>{console.log('connected');process.exit(0)});"
    "s.on('error',e=>{console.log('error',e.code);process.exit(3)})"
)


@dataclass
class OnNode:
    """One sandbox placed by the swarm, its node's engine and the registry its proxy gave."""

    sandbox_id: str
    placement: Placement
    node: docker.DockerClient
    registry: str

    def exec(self, *command: str) -> tuple[int, str]:
        """Run ``command`` in the sandbox through its node's engine."""
        container = self.node.containers.get(self.placement.container_id)
        result = container.exec_run(list(command))
        return int(result.exit_code), result.output.decode(errors="replace").strip()

    def cached(self, instance: str) -> set[str]:
        """The packages in this node's proxy cache."""
        proxy = self.node.containers.get(proxy_container_name(instance))
        listing = proxy.exec_run(["ls", STORAGE_PATH]).output.decode()
        return set(listing.split())


@pytest.fixture(scope="module")
def upstream(swarm_nodes: Cluster) -> Iterator[ForwardProxy]:
    """The nodes' way to the public registry: a forward proxy on the host's leg."""
    with forward_proxy(f"{swarm_nodes.subnet}.1") as proxy:
        yield proxy


@pytest.fixture(scope="module")
def settings(upstream: ForwardProxy) -> SandboxSettings:
    """A small sandbox of this module's own instance whose proxies go out through
    ``upstream``, with the nodes' registry address in its environment."""
    instance = f"test-nodeproxy-{secrets.token_hex(3)}"
    registry = node_registry_url(SUBNET, SandboxSettings().npm_proxy_port)
    proxy_env = {"HTTPS_PROXY": upstream.url, "https_proxy": upstream.url}
    return SandboxSettings(
        instance=instance,
        mem_limit="256m",
        nano_cpus=500_000_000,
        proxy_env=proxy_env,
        ca_bundle=CA_BUNDLE,  # this machine's way out re-signs TLS: its CA, on every node too
        sandbox_registry=registry,
    )


@pytest.fixture(scope="module")
async def copied(swarm_nodes: Cluster) -> dict[str, list[str]]:
    """The sandbox and proxy images onto every node that lacks them, from the host engine."""
    with closing(docker.from_env()) as host, closing(swarm_nodes.manager.client()) as manager:
        return await ensure_images_on_nodes(host, manager, [TEMPLATE.image, PROXY_IMAGE])


@pytest.fixture(scope="module")
async def placed(
    swarm_nodes: Cluster, settings: SandboxSettings, copied: dict[str, list[str]]
) -> AsyncIterator[list[OnNode]]:
    """Two sandboxes on two nodes, each node's proxy ensured right after its placement;
    everything removed after (services, volumes, proxies with their caches, network)."""
    manager = swarm_nodes.manager.client()
    node_clients = [node.client() for node in swarm_nodes.nodes]
    network = settings.network
    await ensure_isolated_network(manager, node_clients, network, settings.instance, SUBNET)
    sandboxes: list[OnNode] = []
    try:
        for _ in range(2):
            sandbox_id = secrets.token_hex(6)
            elsewhere = [f"node.id!={s.placement.node_id}" for s in sandboxes]
            kwargs = sandbox_service_kwargs(
                settings,
                TEMPLATE,
                sandbox_id,
                network=network,
                created=time.time(),
                constraints=elsewhere,
            )
            service_id = await create_sandbox_service(manager, kwargs)
            placement = await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
            node = node_engine(placement)
            registry = await ensure_node_proxy(node, settings)
            sandboxes.append(OnNode(sandbox_id, placement, node, registry))
        yield sandboxes
    finally:
        for sandbox in sandboxes:
            await remove_sandbox_service(manager, sandbox.placement.service_id)
        for sandbox in sandboxes:
            await remove_workspace_volume(sandbox.node, volume_name(sandbox.sandbox_id))
            sandbox.node.close()
        for client in node_clients:
            await remove_proxy(client, settings.instance, with_cache=True)
        await remove_isolated_network(manager, node_clients, network)
        for client in node_clients:
            client.close()
        manager.close()


async def test_every_node_serves_the_same_registry_address(
    placed: list[OnNode], settings: SandboxSettings
) -> None:
    assert len({sandbox.placement.node_id for sandbox in placed}) == 2
    assert [sandbox.registry for sandbox in placed] == [settings.sandbox_registry] * 2
    # Ensuring again adopts the running proxy.
    first = placed[0]
    proxy_id = first.node.containers.get(proxy_container_name(settings.instance)).id
    assert await ensure_node_proxy(first.node, settings) == settings.sandbox_registry
    assert first.node.containers.get(proxy_container_name(settings.instance)).id == proxy_id


async def test_an_install_goes_through_its_own_nodes_proxy(
    placed: list[OnNode], settings: SandboxSettings, upstream: ForwardProxy
) -> None:
    for sandbox, package in zip(placed, PACKAGES, strict=True):
        code, said = sandbox.exec(*npm_argv(install_argv([package]), sandbox.registry))
        assert code == 0, said
        assert sandbox.exec("cat", f"node_modules/{package.split('@')[0]}/package.json")[0] == 0
    names = [package.split("@")[0] for package in PACKAGES]
    # Each node's cache has its own sandbox's package, and not the other node's.
    assert [names[i] in placed[i].cached(settings.instance) for i in (0, 1)] == [True, True]
    assert [names[1 - i] in placed[i].cached(settings.instance) for i in (0, 1)] == [False] * 2
    assert "registry.npmjs.org:443" in upstream.tunnels


async def test_a_sandbox_reaches_its_own_nodes_proxy_and_nothing_of_another_node(
    placed: list[OnNode], swarm_nodes: Cluster, settings: SandboxSettings, upstream: ForwardProxy
) -> None:
    first, second = placed
    gateway, port = subnet_gateway(SUBNET), str(settings.npm_proxy_port)
    assert first.exec("node", "-e", CONNECT_TO, gateway, port) == (0, "connected")
    other = swarm_nodes.node_at(second.placement.node_address).address
    hub_port = upstream.url.rsplit(":", 1)[1]
    for host, to_port in ((other, port), (other, "2377"), (f"{swarm_nodes.subnet}.1", hub_port)):
        code, said = first.exec("node", "-e", CONNECT_TO, host, to_port)
        assert (code, said.split()[0]) == (3, "error"), (host, to_port, said)


async def place_on(manager: docker.DockerClient, settings: SandboxSettings, node_id: str) -> OnNode:
    """One sandbox on the swarm node ``node_id``, with that node's proxy ensured."""
    sandbox_id = secrets.token_hex(6)
    kwargs = sandbox_service_kwargs(
        settings,
        TEMPLATE,
        sandbox_id,
        network=settings.network,
        created=time.time(),
        constraints=[f"node.id=={node_id}"],
    )
    service_id = await create_sandbox_service(manager, kwargs)
    placement = await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
    node = node_engine(placement)
    return OnNode(sandbox_id, placement, node, await ensure_node_proxy(node, settings))


async def remove_placed(manager: docker.DockerClient, sandbox: OnNode) -> None:
    """Remove the sandbox's service and workspace volume; close its node client."""
    await remove_sandbox_service(manager, sandbox.placement.service_id)
    await remove_workspace_volume(sandbox.node, volume_name(sandbox.sandbox_id))
    sandbox.node.close()


def has_network(node: docker.DockerClient, name: str) -> bool:
    """Whether the node has instantiated the swarm network ``name`` (it drops it when its
    last task on it is gone)."""
    return any(n["Name"] == name for n in node.api.networks())


async def test_a_nodes_proxy_serves_again_when_its_bridge_comes_back(
    placed: list[OnNode], swarm_nodes: Cluster, settings: SandboxSettings
) -> None:
    """The third node: its first sandbox starts the proxy; with the sandbox gone the node drops
    its bridge (and the proxy's address); the next sandbox there finds the same proxy serving."""
    with closing(swarm_nodes.manager.client()) as manager:
        taken = {sandbox.placement.node_id for sandbox in placed}
        third = next(str(n.id) for n in manager.nodes.list() if n.id not in taken)
        first = await place_on(manager, settings, third)
        proxy_id = first.node.containers.get(proxy_container_name(settings.instance)).id
        engine = first.placement.engine_url
        await remove_placed(manager, first)
        with closing(docker.DockerClient(base_url=engine)) as node:
            deadline = time.monotonic() + PLACEMENT_TIMEOUT
            while has_network(node, settings.network) and time.monotonic() < deadline:
                await anyio.sleep(0.2)
            assert not has_network(node, settings.network)
        again = await place_on(manager, settings, third)
        try:
            assert again.registry == settings.sandbox_registry
            proxy = again.node.containers.get(proxy_container_name(settings.instance))
            assert proxy.id == proxy_id  # adopted, not started again
            gateway, port = subnet_gateway(SUBNET), str(settings.npm_proxy_port)
            assert again.exec("node", "-e", CONNECT_TO, gateway, port) == (0, "connected")
        finally:
            await remove_placed(manager, again)
