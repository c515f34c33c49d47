"""The reaper: its three rules as pure functions, then one pass against the real engine."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import anyio
import docker
import pytest

from sandbox.containers.labels import INSTANCE_LABEL, sandbox_labels, shared_labels
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.reaper import (
    LabelledObject,
    idle_records,
    label_expired,
    orphan_disks,
    orphans,
)
from sandbox.lifecycle.registry import SandboxRecord
from sandbox.settings import LABEL, SandboxSettings
from tests.sandbox.docker_support import TestInstances, leftovers, manager_on, settings_for

pytestmark = pytest.mark.anyio


def _record(sandbox_id: str, last_used: float) -> SandboxRecord:
    return SandboxRecord(
        id=sandbox_id, template="vanilla", volume="v", network="n", last_used=last_used
    )


def test_idle_records_are_those_unused_for_longer_than_the_ttl() -> None:
    records = [_record("fresh", 950.0), _record("edge", 900.0), _record("stale", 899.0)]
    assert [r.id for r in idle_records(records, now=1000.0, ttl=100.0)] == ["stale"]


@pytest.mark.parametrize(
    ("labels", "expired"),
    [
        pytest.param({"kiln.expiry": "999"}, True, id="past"),
        pytest.param({"kiln.expiry": "1001"}, False, id="future"),
        pytest.param({"kiln.expiry": "0"}, False, id="unset"),
        pytest.param({"kiln.expiry": "soon"}, False, id="garbage"),
        pytest.param({}, False, id="missing"),
    ],
)
def test_label_expiry(labels: dict[str, str], expired: bool) -> None:
    assert label_expired(labels, now=1000.0) is expired


def test_orphans_are_objects_of_unknown_sandboxes_but_never_shared_ones() -> None:
    ours = {INSTANCE_LABEL: "a"}
    objects = [
        LabelledObject("container", "kiln-sb-known", {LABEL: "known", **ours}),
        LabelledObject("volume", "kiln-ws-lost", {LABEL: "lost", **ours}),
        LabelledObject("network", "kiln-sandboxes-a", {LABEL: "shared", **ours}),
    ]
    assert [o.name for o in orphans(objects, {"known"}, "a")] == ["kiln-ws-lost"]


@pytest.mark.parametrize(
    "labels",
    [
        pytest.param({LABEL: "theirs", INSTANCE_LABEL: "b"}, id="another-instance"),
        pytest.param({LABEL: "theirs", INSTANCE_LABEL: "a-b"}, id="an-instance-it-prefixes"),
        pytest.param({LABEL: "theirs"}, id="no-instance"),
        pytest.param({LABEL: "", INSTANCE_LABEL: "a"}, id="no-sandbox"),
    ],
)
def test_nothing_but_its_own_instances_sandbox_objects_is_an_orphan(labels: dict[str, str]) -> None:
    assert orphans([LabelledObject("volume", "kiln-ws-theirs", labels)], set(), "a") == []


def test_an_orphan_subvolume_has_neither_a_volume_nor_a_known_sandbox() -> None:
    disks = ["kiln-ws-known", "kiln-ws-volume", "kiln-ws-lost"]
    volumes = {"kiln-ws-volume"}
    assert orphan_disks(disks, volumes, {"known"}) == ["kiln-ws-lost"]


@pytest.fixture
async def own_manager(instances: TestInstances, redis_url: str) -> AsyncIterator[SandboxManager]:
    """A manager on an instance of its own (no pool), so reaping cannot touch other tests."""
    settings = settings_for(instances.new("reaper"), redis_url, idle_ttl_seconds=600)
    async with manager_on(settings) as manager:
        yield manager


@pytest.mark.docker
async def test_a_reaper_pass_removes_orphans_then_idle_sandboxes_and_only_its_instances(
    own_manager: SandboxManager, docker_client: docker.DockerClient
) -> None:
    instance = own_manager.settings.instance
    kept = await own_manager.provision("vanilla")
    orphan_labels = sandbox_labels("orphan1", instance, template="vanilla")
    docker_client.volumes.create("kiln-ws-orphan1-" + instance, labels=orphan_labels)
    docker_client.networks.create(
        "kiln-net-orphan1-" + instance, internal=True, labels=orphan_labels
    )
    docker_client.volumes.create("kiln-shared-" + instance, labels=shared_labels(instance))

    report = await own_manager.reap(now=time.time())
    assert sorted(report.orphan_volumes + report.orphan_networks) == sorted(
        ["kiln-ws-orphan1-" + instance, "kiln-net-orphan1-" + instance]
    )
    assert report.idle == report.expired == []
    assert (await own_manager.get(kept.id)).container_id == kept.container_id

    later = await own_manager.reap(now=time.time() + 601)
    assert later.idle == [kept.id]
    assert sorted(leftovers(docker_client, instance)) == [
        f"container kiln-npm-proxy-{instance}",  # shared: kept while the instance runs
        f"network kiln-sandboxes-{instance}",
        f"volume kiln-npm-proxy-{instance}",
        f"volume kiln-shared-{instance}",
    ]


PASSES = 3  # reaper periods both instances live through
REAP_INTERVAL = 0.3


def _db(redis_url: str, number: int) -> str:
    """The same Redis server, another database (a server's private Redis, in effect)."""
    parts = urlsplit(redis_url)
    return urlunsplit(parts._replace(path=f"/{number}"))


@asynccontextmanager
async def _running(settings: SandboxSettings) -> AsyncIterator[SandboxManager]:
    """A manager with its reaper loop running; its sandboxes swept at the end."""
    async with manager_on(settings) as manager, manager:
        yield manager


async def _reaped(client: docker.DockerClient, name: str) -> None:
    """Wait until a canary volume is gone: a pass of its instance's reaper ran."""
    with anyio.fail_after(30):
        while name in {v.name for v in client.volumes.list(filters={"name": name})}:
            await anyio.sleep(0.1)


@pytest.mark.docker
async def test_two_instances_on_one_engine_never_reap_each_other(
    instances: TestInstances, redis_url: str, docker_client: docker.DockerClient
) -> None:
    names = [instances.new("own-a"), instances.new("own-b")]
    settings = [
        settings_for(name, _db(redis_url, i + 1), reap_interval_seconds=REAP_INTERVAL)
        for i, name in enumerate(names)
    ]
    async with _running(settings[0]) as first, _running(settings[1]) as second:
        sandboxes = [await first.provision("vanilla"), await second.provision("vanilla")]
        for name in names:  # a shared object by hand too, as the npm proxy's cache is
            docker_client.volumes.create(f"kiln-shared-{name}", labels=shared_labels(name))
        expected = {name: sorted(leftovers(docker_client, name)) for name in names}
        for round_ in range(PASSES):
            canaries = [f"kiln-ws-canary{round_}-{name}" for name in names]
            for canary, name in zip(canaries, names, strict=True):
                labels = sandbox_labels(f"canary{round_}", name, template="vanilla")
                docker_client.volumes.create(canary, labels=labels)
            for canary in canaries:
                await _reaped(docker_client, canary)
            assert {name: sorted(leftovers(docker_client, name)) for name in names} == expected
        for manager, sandbox in zip((first, second), sandboxes, strict=True):
            assert (await manager.get(sandbox.id)).container_id == sandbox.container_id
