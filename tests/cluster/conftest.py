"""The cluster tests' nodes: real dockerd nodes in a swarm (tests/cluster/nodes.py).

One cluster of :data:`CLUSTER_NODES` nodes serves the whole test session (starting it is cheap,
images are not: each node holds ONE loaded copy of an image per session). Each module gets it
through the module-scoped ``swarm_nodes`` fixture, after the images the module names
(``CLUSTER_IMAGES``) are on every node; when the module ends the nodes must hold nothing of it
(no service, container, volume or network beyond the engine's own), so modules cannot see each
other's leftovers. At the end of the session the nodes are removed and the fixture checks the
host engine was left alone: its swarm state is the same as before, and nothing named with the
cluster's prefix is left (processes, cgroups, namespaces, interfaces, mounts, folders).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import closing

import docker
import pytest

from tests.cluster import nodes
from tests.cluster.host_tools import ClusterError
from tests.cluster.leftovers import remaining, remove_stale

CLUSTER_NODES = 3
# The networks every engine (and a swarm member) has of its own.
ENGINE_NETWORKS = frozenset({"bridge", "host", "none", "ingress", "docker_gwbridge"})


def host_swarm_state() -> str:
    """The host engine's swarm state (``inactive`` on CI and this machine)."""
    client = docker.from_env()
    try:
        return str(client.info()["Swarm"]["LocalNodeState"])
    finally:
        client.close()


def objects_on(cluster: nodes.Cluster) -> list[str]:
    """What the tests made on the nodes and did not remove: services (manager), containers,
    volumes and networks (every node)."""
    with closing(cluster.manager.client()) as manager:
        found = [f"service {s.name}" for s in manager.services.list()]
    for node in cluster.nodes:
        with closing(node.client()) as client:
            found += [
                f"{node.name}: container {c.name}"
                for c in client.containers.list(all=True, ignore_removed=True)
            ]
            found += [f"{node.name}: volume {v.name}" for v in client.volumes.list()]
            found += [
                f"{node.name}: network {n.name}"
                for n in client.networks.list()
                if n.name not in ENGINE_NETWORKS
            ]
    return found


@pytest.fixture
def docker_client() -> Iterator[docker.DockerClient]:
    """A client of the host's engine (kiln's own: where the tests run helpers of one node)."""
    client = docker.from_env()
    yield client
    client.close()


@pytest.fixture(scope="session")
def swarm_cluster() -> Iterator[nodes.Cluster]:
    """The session's nodes in a swarm (no images yet); removed, and checked gone, at its end."""
    before = host_swarm_state()
    remove_stale()
    try:
        cluster = nodes.up(CLUSTER_NODES, owner=os.getpid())
    except ClusterError as exc:
        pytest.fail(f"the cluster nodes did not start: {exc}")
    try:
        yield cluster
    finally:
        nodes.down(cluster)
    print(f"cluster {cluster.prefix}: {cluster.timings}")
    assert not remaining(cluster.prefix)
    assert host_swarm_state() == before


@pytest.fixture(scope="module")
def swarm_nodes(
    swarm_cluster: nodes.Cluster, request: pytest.FixtureRequest
) -> Iterator[nodes.Cluster]:
    """The session's nodes with the module's ``CLUSTER_IMAGES`` on each; the module must leave
    nothing on them."""
    try:
        nodes.load_images(swarm_cluster, getattr(request.module, "CLUSTER_IMAGES", ()))
    except ClusterError as exc:
        pytest.fail(f"the cluster nodes did not get their images: {exc}")
    yield swarm_cluster
    left = objects_on(swarm_cluster)
    assert not left, f"{request.module.__name__} left objects on the cluster nodes: {left}"
