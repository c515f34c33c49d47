"""The sandbox backend contract suite (tests/sandbox/backends/test_contract.py) against the swarm
backend, opened as ``kiln serve`` opens it (``KILN_SANDBOX_BACKEND=swarm``, ``DOCKER_HOST`` the
manager) on the session's real 3-node swarm. The suite's tests are the same functions: imported
here, they run with this module's ``opened`` (here, beside the cluster's other modules, so the
session's one set of nodes serves them: tests/cluster/conftest.py)."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing

import pytest

from sandbox.backends.choice import open_backend
from sandbox.backends.swarm import SwarmBackend
from sandbox.disk_mounts import DEFAULT_DISK_ROOT, usable_root
from sandbox.images.builder import PROXY_IMAGE
from sandbox.images.templates import get_template
from sandbox.settings import SandboxSettings
from tests.cluster.nodes import Cluster
from tests.sandbox.backends.test_contract import (  # noqa: F401  (the suite, collected here)
    TEMPLATE,
    Made,
    Opened,
    made,
    test_capacity_names_the_room_of_each_node,
    test_create_gives_a_running_sandbox_with_an_address,
    test_exec_streams_lines_as_they_come_and_returns_the_exit_code,
    test_files_go_in_and_come_out_as_archives,
    test_hardening_is_visible_inside,
    test_park_keeps_the_workspace_revive_brings_it_back_destroy_removes_all,
    test_sandboxes_are_listed_by_their_labels,
    test_the_disk_quota_is_known_where_the_template_has_one,
    test_the_internet_is_not_reachable,
    test_the_npm_registry_is_an_address_a_sandbox_reaches,
    test_the_preview_address_reaches_the_dev_port,
    test_the_root_is_read_only_where_the_workspace_has_a_quota,
    test_the_templates_limits_hold_inside,
)

pytestmark = [pytest.mark.anyio, pytest.mark.docker]
CLUSTER_IMAGES = (get_template(TEMPLATE).image, PROXY_IMAGE)
# Clear of the swarm's pool (10.213/16) and of test_node_proxy's subnet.
SUBNET = "10.215.0.0/24"


# The nodes' disk quota root: the host's btrfs root, which the test nodes share (they run on
# the host's folders). CI runs setup.sh, which makes it: there a missing one fails the tests.
DISK_QUOTA = (
    {"KILN_SWARM_DISK_ROOT": str(DEFAULT_DISK_ROOT)}
    if usable_root(DEFAULT_DISK_ROOT) or os.environ.get("CI")
    else {}
)


def swarm_environment(cluster: Cluster) -> dict[str, str]:
    """What ``kiln serve`` on a swarm is given: the manager as ``DOCKER_HOST``, kiln's own
    engine (the host's, where the images are built) as the image source, the subnet."""
    return {
        "DOCKER_HOST": cluster.manager.url,
        "KILN_SWARM_IMAGE_SOURCE": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
        "KILN_SWARM_SUBNET": SUBNET,
    }


@pytest.fixture(scope="module")
async def swarm_backend(swarm_nodes: Cluster) -> AsyncIterator[Opened]:
    """The swarm backend on the session's nodes, on an instance of its own, with a disk quota
    where the host has a btrfs root (the test nodes' folders are the host's); every node's
    proxy, relay, disk keeper and the network removed after."""
    async with opened_swarm(swarm_nodes, "swarmcontract") as backend:
        yield Opened(backend, backend.settings)


@asynccontextmanager
async def opened_swarm(cluster: Cluster, name: str, **options: str) -> AsyncIterator[SwarmBackend]:
    """The swarm backend as ``kiln serve`` opens it on ``cluster`` (the nodes' disk quota on
    where the host has a root), on an instance of its own named after ``name``; its shared
    parts on every node removed after. ``options``: more of its settings."""
    settings = SandboxSettings(
        instance=f"test-{name}-{secrets.token_hex(3)}",
        mem_limit="256m",
        nano_cpus=500_000_000,
        backend="swarm",
        **options,  # type: ignore[arg-type]
    )
    with pytest.MonkeyPatch.context() as env:
        for variable, value in {**swarm_environment(cluster), **DISK_QUOTA}.items():
            env.setenv(variable, value)
        backend = await open_backend(settings)
    assert isinstance(backend, SwarmBackend)
    try:
        yield backend
        await backend.release_shared()
    finally:
        await backend.aclose()


@pytest.fixture(scope="module", params=[pytest.param("swarm_backend", id="swarm")])
def opened(request: pytest.FixtureRequest) -> Opened:
    """The swarm backend (the suite's ``opened``, with this module's backends)."""
    found: Opened = request.getfixturevalue(request.param)
    return found


async def test_sandboxes_of_the_suite_ran_on_the_swarms_nodes(
    made: Made,  # noqa: F811  (the suite's fixture)
    swarm_nodes: Cluster,
) -> None:
    """The suite's sandbox is a task on one of the nodes, not a container of the host."""
    status = made.status
    assert status.node
    with closing(swarm_nodes.manager.client()) as manager:
        assert status.node in {node.id for node in manager.nodes.list()}
