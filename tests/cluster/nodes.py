"""Real Docker Swarm nodes on one machine: 2 to 3 ``containerd`` + ``dockerd`` pairs, each in a
network namespace of its own, joined into a swarm, with kiln's sandbox images loaded.

Used by the cluster tests (the module-scoped ``swarm_nodes`` fixture of
``tests/cluster/conftest.py``) and by a person (``scripts/cluster-nodes up N`` / ``down``).

Layout of one cluster (every name starts with :attr:`Cluster.prefix`,
``kiln-swarm-test-<random>``, so nothing collides and :func:`remove_leftovers` finds it all):

- a *hub* network namespace ``<prefix>-hub`` holding the bridge the nodes talk over. The bridge
  is not in the host's namespace because there the host engine's ``FORWARD DROP`` policy (with
  ``br_netfilter``) would drop the nodes' traffic to each other unless we added host iptables
  rules; in a namespace of its own no rule is needed and the host's firewall is never touched;
- per node ``i`` a namespace ``<prefix>-n<i>``, linked to the hub bridge by a veth pair, with
  the address ``<subnet>.<10+i>``; its daemons are started inside it with ``nsenter --net=``
  (``ip netns exec`` remounts ``/sys`` and dockerd then fails to start);
- the host gets one veth leg on the hub bridge (``<subnet>.1``), so host processes (kiln, a
  preview) reach each node's address; that traffic is the host's own (OUTPUT/INPUT), never
  forwarded, so the host's firewall still needs no rule. Interface names are Linux-capped at 15
  bytes: they are ``kst<random>`` and a suffix, with the full prefix in their alias;
- per node a folder ``<base>/<prefix>/n<i>`` with containerd's root, state and socket and
  dockerd's ``--data-root``, ``--exec-root``, socket, pid file and a ``--config-file`` of its
  own (so the host's ``/etc/docker/daemon.json`` and ``key.json`` are never read),
  ``--cgroup-parent <prefix>-n<i>`` and ``--no-new-privileges`` (a swarm service cannot ask for
  that security option itself).

The swarm is formed against the NODE sockets only (node 0 the manager, the others workers):
the host engine's swarm state, containers and networks are never touched. Images are copied
from the host engine (``docker save`` | node ``load``) and their image IDs compared.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

from sandbox.cluster.service_spec import ENGINE_LABEL
from tests.cluster.host_tools import (
    OWNER_FILE,
    PREFIX,
    STOP_TIMEOUT_SECONDS,
    ClusterError,
    base_dir,
    binary,
    run,
)
from tests.cluster.leftovers import remove_leftovers

START_TIMEOUT_SECONDS = 60.0
# 198.18.0.0/15 is reserved for benchmarking networks: no real host route uses it.
SUBNET_BASE = "198.18"
NODE_HOST_OFFSET = 10
# The swarm's own overlay pool: clear of the host engine's and the nodes' bridge pools.
SWARM_ADDRESS_POOL = "10.213.0.0/16"
# The images are loaded, never pulled: without this a swarm task spends ~20 s "preparing"
# (trying the registry, unreachable from a node) before it uses the local image.
DAEMON_ENV = {"DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1"}
NODE_READY_SECONDS = 60.0  # a restarted engine back in the swarm
TMPFS_SIZE = "8g"  # the nodes' folders: an upper bound, only what is written takes memory


@dataclass
class Node:
    """One dockerd node: its namespace, address, folder and daemon processes."""

    name: str  # <prefix>-n<i>
    index: int
    address: str
    folder: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def socket(self) -> Path:
        """dockerd's socket."""
        return self.folder / "docker.sock"

    @property
    def url(self) -> str:
        """The node engine's address for a Docker client."""
        return f"unix://{self.socket}"

    def client(self, timeout: float = 120.0) -> docker.DockerClient:
        """A Docker client of this node's engine (the caller closes it)."""
        return docker.DockerClient(base_url=self.url, timeout=int(timeout))


@dataclass
class Cluster:
    """A started set of nodes (node 0 is the swarm manager)."""

    prefix: str
    subnet: str  # e.g. 198.18.37 (a /24)
    folder: Path
    nodes: list[Node]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def manager(self) -> Node:
        """The swarm manager node."""
        return self.nodes[0]

    @property
    def hub(self) -> str:
        """The hub namespace holding the bridge."""
        return f"{self.prefix}-hub"

    def node_at(self, address: str) -> Node:
        """The node advertising ``address`` (the nodes share the host's hostname, so a swarm
        node is told by its address)."""
        for node in self.nodes:
            if node.address == address:
                return node
        raise ClusterError(f"no node of {self.prefix!r} has the address {address!r}")


def short_name(prefix: str, suffix: str) -> str:
    """An interface name within Linux's 15 bytes: ``kst`` + the prefix's random part."""
    return f"kst{prefix.rsplit('-', 1)[1]}{suffix}"


def free_subnet() -> str:
    """A /24 under :data:`SUBNET_BASE` that no route of the host uses yet."""
    routes = run("ip", "-4", "route", "show", "table", "all").stdout
    for _ in range(64):
        subnet = f"{SUBNET_BASE}.{secrets.randbelow(254) + 1}"
        if f"{subnet}." not in routes:
            return subnet
    raise ClusterError(f"no free /24 under {SUBNET_BASE!r}")


def in_netns(namespace: str, *args: str) -> list[str]:
    """``args`` run inside ``namespace`` (network only: see the module docstring)."""
    return [binary("nsenter"), f"--net=/run/netns/{namespace}", binary(args[0]), *args[1:]]


def make_hub(cluster: Cluster) -> None:
    """The hub namespace, its bridge, and the host's leg on it."""
    bridge, host_leg, hub_leg = (short_name(cluster.prefix, s) for s in ("br", "h", "hb"))
    run("ip", "netns", "add", cluster.hub)
    hub = ("ip", "-n", cluster.hub)
    run(*hub, "link", "add", bridge, "type", "bridge")
    run(*hub, "link", "set", bridge, "up")
    run(*hub, "link", "set", "lo", "up")
    run("ip", "link", "add", host_leg, "type", "veth", "peer", "name", hub_leg)
    run("ip", "link", "set", host_leg, "alias", f"{cluster.prefix}-host")
    run("ip", "link", "set", hub_leg, "netns", cluster.hub)
    run(*hub, "link", "set", hub_leg, "master", bridge, "up")
    run("ip", "addr", "add", f"{cluster.subnet}.1/24", "dev", host_leg)
    run("ip", "link", "set", host_leg, "up")


def make_node_netns(cluster: Cluster, node: Node) -> None:
    """The node's namespace, linked to the hub bridge, with its address."""
    bridge = short_name(cluster.prefix, "br")
    inner, outer = (
        short_name(cluster.prefix, f"n{node.index}"),
        short_name(cluster.prefix, f"b{node.index}"),
    )
    run("ip", "netns", "add", node.name)
    run("ip", "link", "add", inner, "netns", node.name, "type", "veth", "peer", "name", outer)
    run("ip", "link", "set", outer, "netns", cluster.hub)
    run("ip", "-n", cluster.hub, "link", "set", outer, "master", bridge, "up")
    netns = ("ip", "-n", node.name)
    run(*netns, "link", "set", "lo", "up")
    run(*netns, "addr", "add", f"{node.address}/24", "dev", inner)
    run(*netns, "link", "set", inner, "up")
    run(*netns, "route", "add", "default", "via", f"{cluster.subnet}.1")


def containerd_config(node: Node) -> Path:
    """containerd's own config (so the host's ``/etc/containerd/config.toml`` is not read)."""
    path = node.folder / "containerd.toml"
    path.write_text(
        "version = 2\n"
        f'root = "{node.folder / "containerd-root"}"\n'
        f'state = "{node.folder / "containerd-state"}"\n'
        "[grpc]\n"
        f'  address = "{node.folder / "containerd.sock"}"\n'
        "[ttrpc]\n"
        f'  address = "{node.folder / "containerd.sock.ttrpc"}"\n'
        "[debug]\n"
        f'  address = "{node.folder / "containerd-debug.sock"}"\n'
        "[metrics]\n"
        '  address = ""\n'
    )
    return path


def dockerd_args(cluster: Cluster, node: Node) -> list[str]:
    """dockerd's flags: everything of its own (module docstring), never the host's."""
    config = node.folder / "daemon.json"
    # Its own trust key (the engine's ID): by default dockerd reads, or makes, the host's
    # /etc/docker/key.json, and every node would share the host engine's ID.
    config.write_text(json.dumps({"deprecated-key-path": str(node.folder / "key.json")}))
    return [
        "dockerd",
        f"--host={node.url}",
        f"--containerd={node.folder / 'containerd.sock'}",
        f"--data-root={node.folder / 'data'}",
        f"--exec-root={node.folder / 'exec'}",
        f"--pidfile={node.folder / 'docker.pid'}",
        f"--config-file={config}",
        f"--cgroup-parent={node.name}",
        "--no-new-privileges",
        "--storage-driver=overlay2",
        "--log-level=warn",
        "--shutdown-timeout=2",  # its containers are test sandboxes: no grace needed
    ]


def start_daemon(node: Node, args: list[str], log_name: str) -> None:
    """Start one daemon of ``node`` inside its namespace, logging to its folder."""
    with (node.folder / log_name).open("wb") as log:
        process = subprocess.Popen(
            in_netns(node.name, *args),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C of the test run reaches it only through us
            env={**os.environ, **DAEMON_ENV},
        )
    node.processes.append(process)


def wait_for(what: str, ready: Callable[[], bool], node: Node, log_name: str) -> None:
    """Poll ``ready`` until it holds, or fail with the node's log tail."""
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in node.processes):
            break
        if ready():
            return
        time.sleep(0.1)
    log = (node.folder / log_name).read_text(errors="replace")[-2000:]
    raise ClusterError(f"{what} of {node.name!r} did not start: {log!r}")


def engine_answers(node: Node) -> bool:
    """Whether the node's dockerd answers a ping."""
    if not node.socket.exists():
        return False
    try:
        with closing(node.client(timeout=5)) as client:
            return bool(client.ping())
    except (docker.errors.DockerException, OSError):
        return False


def start_node(cluster: Cluster, node: Node) -> None:
    """The node's namespace, containerd and dockerd, answering."""
    node.folder.mkdir(parents=True)
    make_node_netns(cluster, node)
    start_daemon(node, ["containerd", "--config", str(containerd_config(node))], "containerd.log")
    containerd_socket = node.folder / "containerd.sock"
    wait_for("containerd", containerd_socket.exists, node, "containerd.log")
    start_daemon(node, dockerd_args(cluster, node), "dockerd.log")
    wait_for("dockerd", lambda: engine_answers(node), node, "dockerd.log")


def form_swarm(cluster: Cluster) -> None:
    """``swarm init`` on node 0 and ``swarm join`` of the others, all by their own sockets."""
    with closing(cluster.manager.client()) as manager:
        manager.swarm.init(
            advertise_addr=cluster.manager.address,
            listen_addr=f"{cluster.manager.address}:2377",
            default_addr_pool=[SWARM_ADDRESS_POOL],
            subnet_size=24,
        )
        token = manager.swarm.attrs["JoinTokens"]["Worker"]
    for node in cluster.nodes[1:]:
        with closing(node.client()) as worker:
            worker.swarm.join(
                remote_addrs=[f"{cluster.manager.address}:2377"],
                join_token=token,
                advertise_addr=node.address,
                listen_addr=f"{node.address}:2377",
            )
    with closing(cluster.manager.client()) as manager:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            ready = [n for n in manager.nodes.list() if n.attrs["Status"]["State"] == "ready"]
            if len(ready) == len(cluster.nodes):
                label_engines(cluster, ready)
                return
            time.sleep(0.2)
    raise ClusterError(f"the swarm of {cluster.prefix!r} did not get all nodes ready")


def save_image(host: docker.DockerClient, image: str, folder: Path) -> Path:
    """``docker save`` of ``image`` from the host engine into a tar in ``folder``, once for
    all nodes (a save per node made the host engine compress nothing but read it all twice)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (image.replace("/", "_").replace(":", "_") + ".tar")
    with path.open("wb") as tar:
        for chunk in host.api.get_image(image, chunk_size=1 << 20):
            tar.write(chunk)
    return path


def label_engines(cluster: Cluster, swarm_nodes: Iterable[Any]) -> None:
    """Give every swarm node the ``kiln.engine`` label: its own engine's socket (the way
    kiln finds a node's engine, :mod:`sandbox.cluster.placement`)."""
    for swarm_node in swarm_nodes:
        spec = dict(swarm_node.attrs["Spec"])
        node = cluster.node_at(swarm_node.attrs["Status"]["Addr"])
        spec["Labels"] = {**spec.get("Labels", {}), ENGINE_LABEL: node.url}
        swarm_node.update(spec)


def load_image(node: Node, image: str, tar: Path, expected_id: str) -> None:
    """Load ``tar`` into ``node`` and check the node's ``image`` has the host's image ID."""
    with closing(node.client(timeout=600)) as client, tar.open("rb") as data:
        client.api.load_image(data)
        loaded = client.images.get(image).id
    if loaded != expected_id:
        raise ClusterError(
            f"{image!r} on {node.name!r} is {loaded!r}, the host has {expected_id!r}"
        )


def node_image_id(node: Node, image: str) -> str | None:
    """The ID of ``image`` on ``node``; ``None`` when it has none."""
    with closing(node.client()) as client:
        try:
            return str(client.images.get(image).id)
        except docker.errors.ImageNotFound:
            return None


def load_images(cluster: Cluster, images: Iterable[str]) -> list[str]:
    """Every image into every node that does not have the host's build of it yet: saved once
    from the host engine, loaded by the nodes in parallel, each checked by its image ID.
    Returns the images that were loaded somewhere."""
    began = time.monotonic()
    missing: dict[str, tuple[str, set[str]]] = {}  # image -> (host ID, nodes lacking it)
    with closing(docker.from_env(timeout=600)) as host:
        for image in images:
            try:
                image_id = str(host.images.get(image).id)
            except docker.errors.ImageNotFound as exc:
                raise ClusterError(f"the host engine has no image {image!r}") from exc
            lacking = {n.name for n in cluster.nodes if node_image_id(n, image) != image_id}
            if lacking:
                missing[image] = (image_id, lacking)
        saved = {image: save_image(host, image, cluster.folder / "images") for image in missing}

    def one_node(node: Node) -> None:
        for image, (image_id, lacking) in missing.items():
            if node.name in lacking:
                load_image(node, image, saved[image], image_id)

    with ThreadPoolExecutor(len(cluster.nodes)) as pool:
        list(pool.map(one_node, cluster.nodes))
    for tar in saved.values():
        tar.unlink()
    cluster.timings["images"] = cluster.timings.get("images", 0.0) + time.monotonic() - began
    return list(missing)


def up(count: int, images: Iterable[str] = (), owner: int | None = None) -> Cluster:
    """Start ``count`` nodes, form their swarm and load ``images``; on failure remove all.

    ``owner``: the process whose end makes the cluster stale (:func:`remove_stale`); ``None``
    for a cluster a person started, which only ``down`` removes."""
    if not 1 <= count <= 9:
        raise ClusterError(f"a cluster has 1 to 9 nodes, not {count!r}")
    prefix = f"{PREFIX}-{secrets.token_hex(3)}"
    subnet = free_subnet()
    folder = base_dir() / prefix
    nodes = [
        Node(f"{prefix}-n{i}", i, f"{subnet}.{NODE_HOST_OFFSET + i}", folder / f"n{i}")
        for i in range(count)
    ]
    cluster = Cluster(prefix, subnet, folder, nodes)
    try:
        began = time.monotonic()
        folder.mkdir(parents=True)
        # In memory: removing a node's image layers from this machine's busy disk took 16 s
        # per 270 MB; unmounting a tmpfs is instant. It holds only what is written.
        run("mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE},mode=0700", prefix, str(folder))
        (folder / OWNER_FILE).write_text("" if owner is None else str(owner))
        make_hub(cluster)
        with ThreadPoolExecutor(count) as pool:
            list(pool.map(lambda node: start_node(cluster, node), nodes))
        cluster.timings["daemons"] = time.monotonic() - began
        began = time.monotonic()
        form_swarm(cluster)
        cluster.timings["swarm"] = time.monotonic() - began
        load_images(cluster, images)
    except BaseException:
        down(cluster)
        raise
    return cluster


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_SECONDS`."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(STOP_TIMEOUT_SECONDS)


def stop_node(node: Node) -> None:
    """Stop the node's daemons, dockerd before its containerd."""
    for process in reversed(node.processes):
        stop_process(process)


def down(cluster: Cluster) -> None:
    """Stop the daemons (dockerd first, so it stops its containers), then remove the rest."""
    began = time.monotonic()
    with ThreadPoolExecutor(max(len(cluster.nodes), 1)) as pool:
        list(pool.map(stop_node, cluster.nodes))
    remove_leftovers(cluster.prefix)
    cluster.timings["down"] = time.monotonic() - began


def kill_engine(node: Node) -> None:
    """SIGKILL the node's dockerd (its containerd and containers live on): the node is lost to
    the swarm and to kiln until :func:`restart_engine`."""
    dockerd = node.processes[-1]
    dockerd.send_signal(signal.SIGKILL)
    dockerd.wait()


def restart_engine(cluster: Cluster, node: Node) -> None:
    """Start the killed node's dockerd again, its network store reset (a dockerd killed with a
    sandbox on a config-from network keeps that config-only network "in use" for good after a
    restart: Docker 20.10, measured), and wait until the swarm has it ready again."""
    node.processes.pop()
    (node.folder / "data" / "network" / "files" / "local-kv.db").unlink(missing_ok=True)
    start_daemon(node, dockerd_args(cluster, node), "dockerd.log")
    wait_for("dockerd", lambda: engine_answers(node), node, "dockerd.log")
    with closing(cluster.manager.client()) as manager:
        deadline = time.monotonic() + NODE_READY_SECONDS
        while time.monotonic() < deadline:
            ready = [n for n in manager.nodes.list() if n.attrs["Status"]["State"] == "ready"]
            if len(ready) == len(cluster.nodes):
                return
            time.sleep(0.2)
    raise AssertionError(f"node {node.name!r} did not rejoin the swarm")
