"""The provisioner's refusals and removals that need no container: capacity is checked before
anything is made, an unknown sandbox is removed by its objects' names, and the shared network
stays while a sandbox is recorded. Making and reviving sandboxes is tested through the manager
(``test_manager.py``) on the real engine."""

from __future__ import annotations

import time
from typing import Any, NoReturn

import pytest

from sandbox.backends.docker_engine import DockerBackend
from sandbox.containers.labels import network_name, volume_name
from sandbox.errors import SandboxCapacity
from sandbox.lifecycle.provisioner import Provisioner
from sandbox.lifecycle.registry import SandboxRecord, SandboxRegistry
from tests.sandbox.docker_support import settings_for

pytestmark = pytest.mark.anyio


class NoDocker:
    """A Docker client that fails the test on any use: what it guards must not touch Docker."""

    def __getattr__(self, name: str) -> NoReturn:
        raise AssertionError(f"Docker was used: client.{name}")


def _provisioner(registry: SandboxRegistry, redis_url: str, **overrides: Any) -> Provisioner:
    """A provisioner on ``registry`` whose every Docker call fails the test."""
    # Settings only: the registry has an instance of its own, and nothing here is named by it.
    settings = settings_for("provisioner-test", redis_url, **overrides)
    client: Any = NoDocker()
    return Provisioner(DockerBackend(client, settings), registry, settings, time.time)


def _record(sandbox_id: str) -> SandboxRecord:
    """A record as a sandbox of another process leaves it."""
    return SandboxRecord(
        id=sandbox_id, template="vanilla", volume=volume_name(sandbox_id), network="n"
    )


async def test_past_the_limit_nothing_is_recorded_nor_made(
    registry: SandboxRegistry, redis_url: str
) -> None:
    await registry.save(_record("held1"))
    provisioner = _provisioner(registry, redis_url, max_sandboxes=1)
    with pytest.raises(SandboxCapacity, match=r"holds 1 sandboxes, the limit is 1") as refused:
        await provisioner.provision("vanilla", owner="o", chat="c", state="in_use")
    assert refused.value.code == "sandbox_capacity"
    assert [record.id for record in await registry.all()] == ["held1"]


async def test_an_unknown_sandbox_is_removed_by_the_names_its_objects_would_have(
    registry: SandboxRegistry, redis_url: str
) -> None:
    record = await _provisioner(registry, redis_url).record_for_removal("gone1")
    assert (record.id, record.template) == ("gone1", "")
    assert (record.volume, record.network) == (volume_name("gone1"), network_name("gone1"))


async def test_a_known_sandbox_is_removed_by_its_record(
    registry: SandboxRegistry, redis_url: str
) -> None:
    await registry.save(_record("known1"))
    record = await _provisioner(registry, redis_url).record_for_removal("known1")
    assert (record.template, record.network) == ("vanilla", "n")


async def test_the_shared_network_stays_while_a_sandbox_is_recorded(
    registry: SandboxRegistry, redis_url: str
) -> None:
    await registry.save(_record("held2"))
    await _provisioner(registry, redis_url).remove_network_if_unused()  # NoDocker: untouched
