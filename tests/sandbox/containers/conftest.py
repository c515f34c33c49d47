"""Fixtures of the container tests: an instance of its own with its network (and proxy)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import docker
import pytest

from sandbox.containers.networks import ensure_sandbox_network, remove_network
from sandbox.lifecycle.manager import Sandbox, SandboxManager
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import TestInstances, remove_npm_proxy, settings_for


@pytest.fixture
async def own_instance(
    instances: TestInstances, redis_url: str, docker_client: docker.DockerClient
) -> AsyncIterator[SandboxSettings]:
    """Settings of an instance of its own, with its network; its proxy and network go after."""
    settings = settings_for(instances.new("proxy"), redis_url)
    await ensure_sandbox_network(docker_client, settings.network, settings.instance)
    yield settings
    await remove_npm_proxy(docker_client, settings.instance)
    await remove_network(docker_client, settings.network)


@pytest.fixture
async def sandboxes(manager: SandboxManager) -> AsyncIterator[list[Sandbox]]:
    """Up to three sandboxes of different owners (made on demand), destroyed afterwards."""
    made: list[Sandbox] = []
    yield made
    for sandbox in made:
        await manager.destroy(sandbox.id)
