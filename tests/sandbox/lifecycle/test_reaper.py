"""The reaper: its three rules as pure functions, then one pass against the real engine."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import docker
import pytest

from sandbox.containers.labels import sandbox_labels, shared_labels
from sandbox.lifecycle.manager import SandboxManager
from sandbox.lifecycle.reaper import (
    LabelledObject,
    idle_records,
    label_expired,
    orphans,
    sweep_instance,
)
from sandbox.lifecycle.registry import SandboxRecord
from sandbox.settings import LABEL
from tests.sandbox.docker_support import TestInstances, leftovers, settings_for

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
    objects = [
        LabelledObject("container", "kiln-sb-known", {LABEL: "known"}),
        LabelledObject("volume", "kiln-ws-lost", {LABEL: "lost"}),
        LabelledObject("network", "kiln-egress", {LABEL: "shared"}),
    ]
    assert [o.name for o in orphans(objects, known_ids={"known"})] == ["kiln-ws-lost"]


@pytest.fixture
async def own_manager(instances: TestInstances, redis_url: str) -> AsyncIterator[SandboxManager]:
    """A manager on an instance of its own (no pool), so reaping cannot touch other tests."""
    settings = settings_for(instances.new("reaper"), redis_url, idle_ttl_seconds=600)
    manager = await SandboxManager.open(settings)
    try:
        yield manager
        await sweep_instance(manager.client, manager.settings.instance, manager.registry)
    finally:
        await manager.aclose()


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
        f"network kiln-sandboxes-{instance}",  # shared: kept while the instance runs
        f"volume kiln-shared-{instance}",
    ]
