"""The npm probe: ``npm view`` from a sandbox-like container on the sandbox network, through the
instance's npm proxy (which the probe starts)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

import docker
import pytest

from sandbox.containers.networks import remove_network
from sandbox.containers.npm_probe import probe_npm
from sandbox.containers.npm_proxy import proxy_volume_name, remove_proxy
from sandbox.containers.provisioning import remove_volume
from sandbox.lifecycle.reaper import labelled_objects
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import TestInstances, settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.docker]


@pytest.fixture
async def probe_settings(
    instances: TestInstances, redis_url: str, docker_client: docker.DockerClient
) -> AsyncIterator[SandboxSettings]:
    """Settings of an instance of its own; the network and proxy the probe made are removed."""
    settings = settings_for(instances.new("probe"), redis_url)
    yield settings
    await remove_proxy(docker_client, settings.instance)
    await remove_volume(docker_client, proxy_volume_name(settings.instance))
    await remove_network(docker_client, settings.network)


async def _containers(client: docker.DockerClient, settings: SandboxSettings) -> list[str]:
    return [
        o.name for o in await labelled_objects(client, settings.instance) if o.kind == "container"
    ]


@pytest.mark.npm
async def test_the_registry_answers_a_sandbox_with_the_ca_bundle(
    docker_client: docker.DockerClient, probe_settings: SandboxSettings
) -> None:
    probe = await probe_npm(docker_client, probe_settings)
    assert probe.ok, probe.output
    assert probe.output.split(".")[0].isdigit()  # npm's version, fetched through the proxy
    assert probe.ca_bundle == probe_settings.ca_bundle is not None
    assert probe.upstream == "https://registry.npmjs.org/"
    assert probe.registry.startswith("http://")
    assert probe.registry.endswith(":4873/")
    # The probe is removed; the proxy it started stays, as the instance's.
    assert await _containers(docker_client, probe_settings) == [
        f"kiln-npm-proxy-{probe_settings.instance}"
    ]


async def test_a_refused_registry_fails_in_npms_words_and_leaves_nothing(
    docker_client: docker.DockerClient, probe_settings: SandboxSettings
) -> None:
    settings = dataclasses.replace(probe_settings, npm_registry="http://127.0.0.1:9/")
    probe = await probe_npm(docker_client, settings, timeout=30)
    assert not probe.ok
    # The proxy has no answer from upstream and nothing cached: the package is "not found".
    assert "npm error code E404" in probe.output
    assert probe.upstream == "http://127.0.0.1:9/"
    assert await _containers(docker_client, settings) == [f"kiln-npm-proxy-{settings.instance}"]
