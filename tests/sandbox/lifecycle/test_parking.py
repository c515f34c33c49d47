"""Parking at stop: which containers go (the rule as a pure function), then one parking of real
sandboxes: volumes and records stay, a sandbox another process holds is left running, the
instance's network and npm proxy go once unused (never another instance's), and a parked
sandbox revives (its npm proxy with it)."""

from __future__ import annotations

import docker
import pytest

from sandbox.containers.labels import container_name
from sandbox.containers.networks import ensure_sandbox_network, remove_network
from sandbox.containers.npm_proxy import proxy_container_name
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.parking import to_park
from sandbox.lifecycle.registry import SandboxRecord
from tests.sandbox.docker_support import TestInstances, settings_for

pytestmark = pytest.mark.anyio
TEMPLATE = "vanilla"


def _record(sandbox_id: str, state: str) -> SandboxRecord:
    return SandboxRecord(id=sandbox_id, template=TEMPLATE, volume="v", network="n", state=state)


def test_parked_are_the_sandboxes_not_in_use_or_held_by_this_process() -> None:
    records = [
        _record("idle", "idle"),
        _record("warm", "warm"),
        _record("mine", "in_use"),
        _record("theirs", "in_use"),
    ]
    assert [r.id for r in to_park(records, {"mine"})] == ["idle", "warm", "mine"]


def test_a_host_sharing_the_instance_parks_only_what_it_holds() -> None:
    records = [_record("idle", "idle"), _record("mine", "in_use"), _record("theirs", "in_use")]
    assert [r.id for r in to_park(records, {"mine"}, shared=True)] == ["mine"]


def _exists(client: docker.DockerClient, kind: str, name: str) -> bool:
    collection = getattr(client, kind)
    try:
        collection.get(name)
    except docker.errors.NotFound:
        return False
    return True


@pytest.mark.docker
async def test_park_keeps_volumes_and_records_and_what_others_hold(
    instances: TestInstances, redis_url: str, docker_client: docker.DockerClient
) -> None:
    settings = settings_for(instances.new("park"), redis_url)
    manager = await SandboxManager.open(settings)
    # A network of the same name but another instance's (KILN_SANDBOX_NETWORK): never removed.
    other = f"kiln-other-{settings.instance}"
    await ensure_sandbox_network(manager.client, other, "another-instance")
    try:
        mine = await manager.acquire(chat="c-mine", owner="u", template=TEMPLATE)
        theirs = await manager.provision(TEMPLATE, state="in_use")
        idle = await manager.provision(TEMPLATE, state="idle")
        report = await manager.park()
        assert sorted(report.parked) == sorted([mine.id, idle.id])
        assert report.kept_in_use == [theirs.id]
        assert report.networks_removed == []  # a container still uses the sandbox network
        assert not report.proxy_removed  # ... and the npm proxy on it
        assert _exists(docker_client, "containers", proxy_container_name(settings.instance))
        for parked in (mine, idle):
            assert not _exists(docker_client, "containers", container_name(parked.id))
            assert _exists(docker_client, "volumes", parked.volume)
            record = await manager.registry.get(parked.id)
            assert record is not None
            assert (record.container_id, record.state) == ("", "idle")
        assert docker_client.containers.get(container_name(theirs.id)).status == "running"
        await manager.destroy(theirs.id)
        again = await manager.park()
        assert again.networks_removed == [settings.network]
        assert again.proxy_removed
        assert not _exists(docker_client, "containers", proxy_container_name(settings.instance))
        assert _exists(docker_client, "networks", other)
        revived = await manager.container_for(mine.id)  # the next start, on the kept volume
        assert revived.status == "running"
        assert _exists(docker_client, "containers", proxy_container_name(settings.instance))
    finally:
        for record in await manager.list():
            await manager.destroy(record.id)
        await remove_network(manager.client, settings.network)
        await remove_network(manager.client, other)
        await manager.aclose()
