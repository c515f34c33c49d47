"""sandbox.cluster on real swarm nodes: two sandboxes placed as services land on two nodes, run
commands through their own node's engine, cannot reach each other, are hardened as ``docker
run`` sandboxes are (seen by ``docker inspect`` on the node), and leave nothing behind."""

from __future__ import annotations

import io
import secrets
import tarfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass, replace

import docker
import pytest

from sandbox.cluster.capacity import cluster_capacity
from sandbox.cluster.networks import (
    config_network_name,
    ensure_isolated_network,
    remove_isolated_network,
)
from sandbox.cluster.node_checks import check_sandbox_node
from sandbox.cluster.node_images import nodes_lacking
from sandbox.cluster.placement import (
    Placement,
    apply_node_limits,
    create_sandbox_service,
    node_engine,
    remove_sandbox_service,
    remove_workspace_volume,
    wait_for_placement,
)
from sandbox.cluster.service_spec import sandbox_service_kwargs
from sandbox.containers.labels import INSTANCE_LABEL, volume_name
from sandbox.env_settings import size_bytes
from sandbox.errors import SandboxCapacity
from sandbox.images.templates import WORKSPACE, get_template
from sandbox.settings import SandboxSettings
from tests.cluster.nodes import Cluster
from tests.sandbox.docker_support import sandbox_files_tar

pytestmark = pytest.mark.anyio
TEMPLATE = get_template("vanilla")  # the smallest sandbox image: 13 s onto three nodes
CLUSTER_IMAGES = (TEMPLATE.image,)
PLACEMENT_TIMEOUT = 60.0
PROBE_PORT = 9000
# Connects to argv[1]:PROBE_PORT and prints what it got, or why not (exit 0 only on an answer).
CONNECT = (
    f"const s=require('net').connect({PROBE_PORT},process.argv[1]);s.setTimeout(3000);"
    "s.on('data',d=>{console.log(String(d));process.exit(0)});"
    "s.on('error',e=>{console.log(e.code);process.exit(2)});"
    "s.on('timeout',()=>{console.log('timeout');process.exit(3)})"
)
LISTEN = f"require('net').createServer(s=>s.end('hello')).listen({PROBE_PORT})"


@dataclass
class Placed:
    """One sandbox placed by the swarm, with its node's engine."""

    sandbox_id: str
    placement: Placement
    node: docker.DockerClient

    def exec(self, *command: str) -> tuple[int, str]:
        """Run ``command`` in the sandbox through its node's engine."""
        container = self.node.containers.get(self.placement.container_id)
        result = container.exec_run(list(command))
        return int(result.exit_code), result.output.decode(errors="replace").strip()

    def address(self, network: str) -> str:
        """The sandbox's address on ``network``, from its node."""
        container = self.node.containers.get(self.placement.container_id)
        return str(container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


@pytest.fixture(scope="module")
def settings() -> SandboxSettings:
    """A small sandbox of this module's own instance."""
    return SandboxSettings(
        instance=f"test-swarm-{secrets.token_hex(3)}", mem_limit="256m", nano_cpus=500_000_000
    )


@pytest.fixture(scope="module")
def manager(swarm_nodes: Cluster) -> Iterator[docker.DockerClient]:
    """A client of the swarm manager's engine."""
    client = swarm_nodes.manager.client()
    yield client
    client.close()


@pytest.fixture(scope="module")
async def placed(
    swarm_nodes: Cluster, manager: docker.DockerClient, settings: SandboxSettings
) -> AsyncIterator[list[Placed]]:
    """Two sandboxes on the isolated network, each with its node's limits applied; removed
    (services, workspace volumes, network) after the module."""
    node_clients = [node.client() for node in swarm_nodes.nodes]
    network = settings.network
    await ensure_isolated_network(manager, node_clients, network, settings.instance)
    sandboxes: list[Placed] = []
    services: dict[str, str] = {}  # sandbox id -> service id
    try:
        # Both asked for before either is waited for: the swarm starts them at once.
        for _ in range(2):
            sandbox_id = secrets.token_hex(6)
            kwargs = sandbox_service_kwargs(
                settings, TEMPLATE, sandbox_id, network=network, created=time.time()
            )
            services[sandbox_id] = await create_sandbox_service(manager, kwargs)
        for sandbox_id, service_id in services.items():
            placement = await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
            node = node_engine(placement)
            await apply_node_limits(node, placement, size_bytes(settings.mem_limit))
            sandboxes.append(Placed(sandbox_id, placement, node))
        yield sandboxes
    finally:
        for service_id in services.values():
            await remove_sandbox_service(manager, service_id)
        for sandbox in sandboxes:
            await remove_workspace_volume(sandbox.node, volume_name(sandbox.sandbox_id))
            sandbox.node.close()
        await remove_isolated_network(manager, node_clients, network)
        for client in node_clients:
            client.close()


async def test_the_host_engine_is_not_part_of_the_swarm(
    placed: list[Placed], swarm_nodes: Cluster
) -> None:
    host = docker.from_env()
    try:
        info = host.info()
        assert info["Swarm"]["LocalNodeState"] == "inactive"
        # Every node is an engine of its own (own trust key): none shares the host's identity.
        engine_ids = set()
        for node in swarm_nodes.nodes:
            with closing(node.client()) as client:
                engine_ids.add(client.info()["ID"])
        assert len(engine_ids) == len(swarm_nodes.nodes)
        assert info["ID"] not in engine_ids
        # The plain list: the SDK's containers.list() inspects each one, and other sessions'
        # containers come and go meanwhile.
        ids = {c["Id"] for c in host.api.containers(all=True)}
        assert not ids & {sandbox.placement.container_id for sandbox in placed}
    finally:
        host.close()


async def test_a_sandbox_no_node_has_room_for_is_refused_at_once(
    placed: list[Placed], manager: docker.DockerClient, settings: SandboxSettings
) -> None:
    huge = replace(settings, mem_limit="4096g")  # more memory than any node has to reserve
    kwargs = sandbox_service_kwargs(
        huge, TEMPLATE, secrets.token_hex(6), network=settings.network, created=time.time()
    )
    service_id = await create_sandbox_service(manager, kwargs)
    try:
        with pytest.raises(SandboxCapacity, match="insufficient resources"):
            await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
    finally:
        assert await remove_sandbox_service(manager, service_id)


async def test_two_sandboxes_spread_over_two_nodes(placed: list[Placed]) -> None:
    nodes = {sandbox.placement.node_id for sandbox in placed}
    assert len(nodes) == 2, [sandbox.placement for sandbox in placed]


async def test_commands_run_through_each_sandbox_node(
    placed: list[Placed], swarm_nodes: Cluster
) -> None:
    for sandbox in placed:
        node = swarm_nodes.node_at(sandbox.placement.node_address)
        assert sandbox.placement.engine_url == node.url  # the node label named its own engine
        assert sandbox.exec("id", "-u") == (0, "1000")
        assert sandbox.exec("hostname") == (0, "sandbox")


async def test_files_go_in_and_out_through_each_sandbox_node(placed: list[Placed]) -> None:
    for sandbox in placed:
        container = sandbox.node.containers.get(sandbox.placement.container_id)
        assert container.put_archive(
            WORKSPACE, sandbox_files_tar({"probe.txt": sandbox.sandbox_id})
        )
        # The sandbox user owns its workspace volume, made by the node at the task's start.
        assert sandbox.exec("sh", "-c", "cat probe.txt && echo more >> probe.txt") == (
            0,
            sandbox.sandbox_id,
        )
        stream, _ = container.get_archive(f"{WORKSPACE}/probe.txt")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile("probe.txt")
            assert member is not None
            assert member.read().decode() == f"{sandbox.sandbox_id}more\n"


async def test_sandboxes_cannot_reach_each_other(
    placed: list[Placed], settings: SandboxSettings
) -> None:
    first, second = placed
    container = second.node.containers.get(second.placement.container_id)
    container.exec_run(["node", "-e", LISTEN], detach=True)
    second_address = second.address(settings.network)
    # The listener answers on its own address (the probe can succeed) ...
    assert listen_in(second, second_address) == (0, "hello")
    # ... and the other node's sandbox cannot reach it, nor anything off its bridge.
    code, said = first.exec("node", "-e", CONNECT, second_address)
    assert code != 0, said
    code, said = first.exec("node", "-e", CONNECT, "1.1.1.1")
    assert code != 0, said


def listen_in(sandbox: Placed, address: str) -> tuple[int, str]:
    """Start the probe's listener in ``sandbox``; what the probe gets from it on ``address``
    once it listens (or its last answer after 30 s)."""
    container = sandbox.node.containers.get(sandbox.placement.container_id)
    container.exec_run(["node", "-e", LISTEN], detach=True)
    answer: tuple[int, str] = (-1, "")
    deadline = time.monotonic() + 30
    while answer[0] != 0 and time.monotonic() < deadline:
        answer = sandbox.exec("node", "-e", CONNECT, address)
    return answer


async def test_on_an_overlay_the_same_probe_crosses_nodes(
    placed: list[Placed], manager: docker.DockerClient, settings: SandboxSettings
) -> None:
    """The control of the isolation test: the nodes' link carries a sandbox's connection to
    another node when the network lets it (an overlay), so the refusal above is the network's."""
    overlay = manager.networks.create(f"kiln-overlay-{secrets.token_hex(3)}", driver="overlay")
    sandboxes: list[Placed] = []
    try:
        for _ in range(2):
            sandbox_id = secrets.token_hex(6)
            # The second on another node than the first.
            elsewhere = [f"node.id!={s.placement.node_id}" for s in sandboxes]
            kwargs = sandbox_service_kwargs(
                settings,
                TEMPLATE,
                sandbox_id,
                network=overlay.name,
                created=time.time(),
                constraints=elsewhere,
            )
            service_id = await create_sandbox_service(manager, kwargs)
            placement = await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
            sandboxes.append(Placed(sandbox_id, placement, node_engine(placement)))
        first, second = sandboxes
        assert first.placement.node_id != second.placement.node_id
        assert listen_in(second, second.address(overlay.name)) == (0, "hello")
        assert first.exec("node", "-e", CONNECT, second.address(overlay.name)) == (0, "hello")
    finally:
        for sandbox in sandboxes:
            await remove_sandbox_service(manager, sandbox.placement.service_id)
        for sandbox in sandboxes:
            await remove_workspace_volume(sandbox.node, volume_name(sandbox.sandbox_id))
            sandbox.node.close()
        overlay.remove()


async def test_hardening_is_visible_on_the_node(
    placed: list[Placed], settings: SandboxSettings, swarm_nodes: Cluster
) -> None:
    for sandbox in placed:
        container = sandbox.node.containers.get(sandbox.placement.container_id)
        host, config = container.attrs["HostConfig"], container.attrs["Config"]
        assert config["User"] == "1000:1000"
        assert host["CapDrop"] == ["ALL"]
        assert host["Init"] is True
        assert host["PidsLimit"] == settings.pids_limit
        assert host["Memory"] == size_bytes(settings.mem_limit)
        assert host["NanoCpus"] == settings.nano_cpus
        assert host["LogConfig"]["Config"]["max-size"] == settings.log_max_size
        # The daemon's --cgroup-parent (not recorded in HostConfig): the node's own cgroup.
        code, cgroups = sandbox.exec("cat", "/proc/1/cgroup")
        assert code == 0
        assert f":/{swarm_nodes.prefix}-n" in cgroups, cgroups
        assert config["Labels"][INSTANCE_LABEL] == settings.instance
        checks = await check_sandbox_node(sandbox.node, sandbox.placement.container_id)
        assert [(c.requirement.setting, c.met) for c in checks] == [
            ("security_opt=no-new-privileges", True),
            ("memswap_limit=mem_limit", True),
        ], checks


async def test_capacity_counts_each_node_and_its_reservations(
    placed: list[Placed],
    manager: docker.DockerClient,
    settings: SandboxSettings,
    swarm_nodes: Cluster,
) -> None:
    report = await cluster_capacity(manager, settings.instance)
    sandbox_bytes = size_bytes(settings.mem_limit)
    assert [c.address for c in report] == sorted(n.address for n in swarm_nodes.nodes)
    assert all(c.usable and c.memory_bytes > 0 and c.nano_cpus > 0 for c in report), report
    by_node = {c.node_id: c for c in report}
    for sandbox in placed:
        node = by_node[sandbox.placement.node_id]
        assert (node.sandboxes, node.reserved_bytes) == (1, sandbox_bytes)
        assert node.room(sandbox_bytes) == (node.memory_bytes - sandbox_bytes) // sandbox_bytes
    assert sum(c.sandboxes for c in report) == len(placed)


async def test_a_service_alone_gets_swap_until_the_node_limits_apply(
    placed: list[Placed], manager: docker.DockerClient, settings: SandboxSettings
) -> None:
    sandbox_id = secrets.token_hex(6)
    kwargs = sandbox_service_kwargs(
        settings, TEMPLATE, sandbox_id, network=settings.network, created=time.time()
    )
    service_id = await create_sandbox_service(manager, kwargs)
    placement = await wait_for_placement(manager, service_id, PLACEMENT_TIMEOUT)
    node = node_engine(placement)
    try:
        swap = (await check_sandbox_node(node, placement.container_id))[1]
        assert (swap.requirement.setting, swap.met) == ("memswap_limit=mem_limit", False), swap
        await apply_node_limits(node, placement, size_bytes(settings.mem_limit))
        swap = (await check_sandbox_node(node, placement.container_id))[1]
        assert swap.met, swap
    finally:
        await remove_sandbox_service(manager, service_id)
        await remove_workspace_volume(node, volume_name(sandbox_id))
        node.close()


async def test_nodes_lacking_an_image_or_its_build_are_named(
    manager: docker.DockerClient, swarm_nodes: Cluster
) -> None:
    host = docker.from_env()
    try:
        built = str(host.images.get(TEMPLATE.image).id)
    finally:
        host.close()
    assert await nodes_lacking(manager, {TEMPLATE.image: built}) == {}
    other_build = await nodes_lacking(manager, {TEMPLATE.image: "sha256:0"})
    assert len(other_build) == len(swarm_nodes.nodes)
    assert all(words == [f"{TEMPLATE.image} ({built})"] for words in other_build.values())
    missing = await nodes_lacking(manager, {"kiln/none:latest": "sha256:0"})
    assert set(map(tuple, missing.values())) == {("kiln/none:latest (missing)",)}


async def test_each_node_has_its_own_isolated_bridge(
    placed: list[Placed], swarm_nodes: Cluster, settings: SandboxSettings
) -> None:
    for node in swarm_nodes.nodes:
        with closing(node.client()) as client:
            config = client.networks.get(config_network_name(settings.network)).attrs
            assert config["ConfigOnly"] is True
            assert config["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    for sandbox in placed:
        network = sandbox.node.networks.get(settings.network).attrs
        assert (network["Scope"], network["Internal"], network["Driver"]) == (
            "swarm",
            True,
            "bridge",
        )
