"""kiln on the session's real 3-node swarm (``KILN_SANDBOX_BACKEND=swarm``, ``DOCKER_HOST`` the
manager): ``kiln sandbox apply`` builds the demo app (a real install through a node's npm proxy,
the preview serving it through the node's relay), ``kiln doctor`` lists each node with its
capacity and hardening, the sandboxes of 6 chats spread over the nodes, and a node killed
mid-use ends that sandbox in words (``sandbox_lost``) while the chat's next acquire lands on
another node. The killed node's engine is started again after (it rejoins the swarm), so the
session's later modules find three ready nodes."""

from __future__ import annotations

import gc
import json
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from sandbox.backends.swarm import SwarmBackend
from sandbox.cluster.placement import remove_workspace_volume
from sandbox.containers.labels import INSTANCE_LABEL
from sandbox.disk_mounts import DEFAULT_DISK_ROOT
from sandbox.errors import SandboxLost
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import get_template
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import LABEL, SandboxSettings
from tests.cluster import nodes
from tests.cluster.conftest import objects_on
from tests.cluster.forward_proxy import ForwardProxy, forward_proxy
from tests.cluster.nodes import Cluster
from tests.cluster.test_swarm_contract import DISK_QUOTA
from tests.redis_server import start_redis, stop_redis
from tests.sandbox.docker_support import CA_BUNDLE

pytestmark = [pytest.mark.anyio, pytest.mark.docker, pytest.mark.npm]
CLUSTER_IMAGES = (
    get_template("vite-react").image,
    get_template("vanilla").image,
    PROXY_IMAGE,
)
RECORDINGS = Path(__file__).resolve().parents[3] / "shared" / "recordings"
KILN = Path(sys.executable).parent / "kiln"
SUBNET = "10.216.0.0/24"  # clear of the other cluster modules' subnets
CLI_TIMEOUT = 600.0
CHATS = 6


@dataclass(frozen=True)
class Swarm:
    """The module's kiln on the swarm: its settings and environment, the nodes' way out."""

    cluster: Cluster
    settings: SandboxSettings
    env: dict[str, str]
    upstream: ForwardProxy

    def kiln(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``kiln ARGS`` with the module's environment."""
        return subprocess.run(
            [str(KILN), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
        )


def swarm_env(cluster: Cluster, instance: str, subnet: str, upstream: str) -> dict[str, str]:
    """kiln's settings for the swarm of ``cluster`` (its manager as ``DOCKER_HOST``, images
    copied from the host's engine, the disk quota where it can be had) with the nodes' proxies
    going out through ``upstream``; sandboxes of 512 MiB, no warm pool."""
    return {
        "HTTPS_PROXY": upstream,
        "https_proxy": upstream,
        "KILN_SANDBOX_BACKEND": "swarm",
        "DOCKER_HOST": cluster.manager.url,
        "KILN_SWARM_IMAGE_SOURCE": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
        "KILN_SWARM_SUBNET": subnet,
        **DISK_QUOTA,
        "KILN_INSTANCE": instance,
        "KILN_SANDBOX_MEMORY": "512m",
        "KILN_WARM_POOL_SIZE": "0",
    }


@pytest.fixture(scope="module")
def swarm(swarm_nodes: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    """A Redis of the module's own, the nodes' forward proxy, and kiln's settings on the swarm
    (env for the CLI, settings for an in-process manager)."""
    redis, redis_url = start_redis(tmp_path_factory.mktemp("redis"))
    instance = f"test-swarme2e-{secrets.token_hex(3)}"
    try:
        with forward_proxy(f"{swarm_nodes.subnet}.1") as upstream:
            proxy_env = {"HTTPS_PROXY": upstream.url, "https_proxy": upstream.url}
            env = {
                **os.environ,
                **swarm_env(swarm_nodes, instance, SUBNET, upstream.url),
                "KILN_DATA_DIR": str(tmp_path_factory.mktemp("data")),
                "REDIS_URL": redis_url,
            }
            settings = replace(
                SandboxSettings.from_env(env), proxy_env=proxy_env, ca_bundle=CA_BUNDLE
            )
            yield Swarm(swarm_nodes, settings, env, upstream)
    finally:
        stop_redis(redis)


@pytest.fixture(scope="module")
async def manager(swarm: Swarm) -> AsyncIterator[SandboxManager]:
    """A sandbox manager on the swarm (opened as ``kiln serve`` opens it); everything of the
    instance removed after: sandboxes, every node's proxy and relay, the network."""
    with pytest.MonkeyPatch.context() as env:
        for name in ("DOCKER_HOST", "KILN_SWARM_IMAGE_SOURCE", "KILN_SWARM_SUBNET", *DISK_QUOTA):
            env.setenv(name, swarm.env[name])
        opened = await SandboxManager.open(swarm.settings)
    try:
        yield opened
        for record in await opened.list():
            await opened.destroy(record.id)
        await opened.backend.release_shared()
    finally:
        await opened.aclose()
        gc.collect()  # the killed node's leaked sockets (see the node loss test)


def node_of_address(cluster: Cluster, url: str) -> nodes.Node:
    """The node whose address ``url`` names."""
    return cluster.node_at(httpx.URL(url).host)


async def test_apply_builds_the_demo_app_with_an_install_through_a_nodes_proxy(
    swarm: Swarm, manager: SandboxManager
) -> None:
    done = swarm.kiln("sandbox", "apply", str(RECORDINGS / "todo-vite-react.txt"), "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout)
    assert (summary["template"], summary["errors"]) == ("vite-react", [])
    assert summary["installs"] == [{"packages": ["zustand"], "exit_code": 0}]
    assert summary["commands"] == [{"argv": ["npm", "run", "build"], "exit_code": 0}]
    assert "registry.npmjs.org:443" in swarm.upstream.tunnels  # from a node's proxy
    node_of_address(swarm.cluster, summary["dev_url"])  # served through a node's relay
    async with httpx.AsyncClient(timeout=30) as http:
        page = await http.get(summary["dev_url"])
        app = await http.get(summary["dev_url"] + "src/App.jsx")
    assert page.status_code == 200
    assert "/src/main.jsx" in page.text
    assert app.status_code == 200
    assert "Todos" in app.text
    await manager.destroy(summary["sandbox_id"])


async def test_doctor_lists_each_node_with_its_capacity_and_hardening(swarm: Swarm) -> None:
    done = swarm.kiln("doctor", "--json")
    checks = json.loads(done.stdout)["checks"]
    lines = {c["name"]: c for c in checks if c["name"].startswith("swarm node ")}
    assert set(lines) == {f"swarm node {node.address}" for node in swarm.cluster.nodes}
    for line in lines.values():
        assert line["ok"], line
        for seen in (
            "ready/active",
            "room for",
            "bridged traffic filtered",
            "no-new-privileges: met",
            "mem_limit: met",
        ):
            assert seen in line["detail"], line
        if DISK_QUOTA:
            assert f"disk quota 2g on {str(DEFAULT_DISK_ROOT)!r}" in line["detail"], line
    # The images are read where kiln builds them (KILN_SWARM_IMAGE_SOURCE), not on the manager,
    # which holds only those some sandbox needed ("missing" there is no fault).
    images = {c["name"]: c for c in checks if c["name"].startswith("image ")}
    assert images["image vite-react"]["ok"], images
    # None of kiln's own host's numbers: the nodes hold the sandboxes.
    rows = {c["name"]: c["detail"] for c in checks}
    assert "kiln sandboxes in the swarm in all" in rows["capacity"], rows["capacity"]
    assert "'swarm node' line" in rows["memory"]
    assert "'swarm node' line" in rows["disk"]
    assert "GiB available" not in rows["memory"]


# docker-py leaks the socket of a refused unix-socket connection (transport/unixconn.py makes it
# and raises from connect without closing it): each call to the killed node's socket is one, and
# pytest reports them as unraisable warnings. A node's tcp:// engine does not leak. They are
# collected (gc) before this test's teardown ends, under this filter, not at the session's end.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_six_chats_spread_over_the_nodes_and_a_lost_node_moves_its_chat(
    swarm: Swarm, manager: SandboxManager
) -> None:
    backend = manager.backend
    assert isinstance(backend, SwarmBackend)
    chats = [f"chat-{index}" for index in range(CHATS)]
    # One owner per chat: a user holds at most KILN_MAX_SANDBOXES_PER_USER (4).
    sandboxes = [await manager.acquire(chat, chat, "vanilla") for chat in chats]
    placed = await backend.list_by_labels({INSTANCE_LABEL: swarm.settings.instance})
    node_of = {status.sandbox_id: status.node for status in placed}
    counts = sorted(list(node_of.values()).count(n) for n in set(node_of.values()))
    assert counts == [2, 2, 2], node_of
    # A worker's engine dies with a chat's sandbox on it (the manager keeps the swarm going).
    with closing(swarm.cluster.manager.client()) as client:
        manager_node = client.info()["Swarm"]["NodeID"]
    lost = next(s for s in sandboxes if node_of[s.id] != manager_node)
    status = await backend.status(lost.container_id)
    assert status is not None
    killed = swarm.cluster.node_at(await node_address(backend, status.node))
    nodes.kill_engine(killed)
    try:
        with pytest.raises(SandboxLost, match="no reachable swarm node") as said:
            await manager.container_for(lost.id)
        assert said.value.code == "sandbox_lost"
        again = await manager.acquire(lost.chat, lost.chat, "vanilla")
        assert again.id != lost.id
        moved = await backend.status(again.container_id)
        assert moved is not None
        assert moved.node not in (status.node, "")
    finally:
        nodes.restart_engine(swarm.cluster, killed)
        # The lost sandbox's workspace stayed on its node: removed once its old task is.
        await remove_workspace_volume(backend.engine(killed.url), f"kiln-ws-{lost.id}")
        gc.collect()


async def node_address(backend: SwarmBackend, node_id: str) -> str:
    """The swarm's address of node ``node_id``."""
    node = backend.manager.nodes.get(node_id)
    return str(node.attrs["Status"]["Addr"])


async def test_the_reaper_removes_a_service_whose_record_is_gone(
    swarm: Swarm, manager: SandboxManager
) -> None:
    sandbox = await manager.acquire("orphan-chat", "orphan-owner", "vanilla")
    record = await manager.registry.get(sandbox.id)
    assert record is not None
    await manager.registry.delete(record)  # a crash between the record's removal and the rest
    report = await manager.reap()
    assert f"service kiln-sb-{sandbox.id}" in report.elsewhere, report
    with closing(swarm.cluster.manager.client()) as client:
        assert not client.services.list(filters={"label": f"{LABEL}={sandbox.id}"})


async def test_reap_all_leaves_nothing_of_the_instance_on_any_node(
    swarm: Swarm, manager: SandboxManager
) -> None:
    await manager.acquire("last-chat", "last-owner", "vanilla")
    done = swarm.kiln("sandbox", "reap", "--all")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "removed service kiln-sb-" in done.stdout, done.stdout  # the swarm's, too
    assert not objects_on(swarm.cluster), done.stdout
