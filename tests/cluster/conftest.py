"""The cluster tests' nodes: a module-scoped swarm of real dockerd nodes (tests/cluster/nodes.py).

A module says how many nodes (``CLUSTER_NODES``, default 2) and which of the host engine's
images they need (``CLUSTER_IMAGES``). The fixture checks the host engine is left alone: its
swarm state is the same before and after, and after the nodes are removed nothing named with
their prefix is left (processes, namespaces, interfaces, mounts, cgroups, folders).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.cluster import nodes


def host_swarm_state() -> str:
    """The host engine's swarm state (``inactive`` on CI and this machine)."""
    client = docker.from_env()
    try:
        return str(client.info()["Swarm"]["LocalNodeState"])
    finally:
        client.close()


def leftovers(prefix: str) -> list[str]:
    """Whatever of the cluster ``prefix`` still exists."""
    found = [f"process {pid}" for pid in nodes.daemon_pids(prefix)]
    found += [f"cgroup {folder}" for folder in nodes.cgroup_folders(prefix)]
    found += [n for n in nodes.run("ip", "netns", "list").stdout.split() if n.startswith(prefix)]
    found += [f"link {link}" for link in nodes.host_legs(prefix)]
    found += [str(folder) for folder in nodes.base_dir().glob(f"{prefix}*")]
    mounts = Path("/proc/self/mountinfo").read_text()
    return found + (["mounts"] if str(nodes.base_dir() / prefix) in mounts else [])


@pytest.fixture(scope="module")
def swarm_nodes(request: pytest.FixtureRequest) -> Iterator[nodes.Cluster]:
    """Started nodes in a swarm with the module's images; removed after the module."""
    count = getattr(request.module, "CLUSTER_NODES", 2)
    images = getattr(request.module, "CLUSTER_IMAGES", ())
    before = host_swarm_state()
    nodes.remove_stale()
    try:
        cluster = nodes.up(count, images, owner=os.getpid())
    except nodes.ClusterError as exc:
        pytest.fail(f"the cluster nodes did not start: {exc}")
    try:
        yield cluster
    finally:
        nodes.down(cluster)
    print(f"cluster {cluster.prefix}: {cluster.timings}")
    assert not leftovers(cluster.prefix)
    assert host_swarm_state() == before
