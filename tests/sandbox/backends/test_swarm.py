"""The swarm backend's opening: ``DOCKER_HOST`` must be a swarm manager (the host engine here is
not one: refused in words), and its settings refused in words when bad. Everything else of
sandbox.backends.swarm runs on real nodes: the contract suite in tests/cluster/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.backends.swarm import open_backend
from sandbox.cluster.swarm_settings import SwarmSettings
from sandbox.errors import DockerUnavailable, SandboxConfigError
from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.anyio


@pytest.mark.docker
async def test_an_engine_that_is_no_swarm_manager_is_refused_in_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The host engine: never in a swarm (tests/cluster/conftest.py checks it stays so).
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    monkeypatch.setenv("DOCKER_HOST", host)
    with pytest.raises(DockerUnavailable, match="is not a swarm manager") as refused:
        await open_backend(SandboxSettings(backend="swarm"))
    assert host in str(refused.value)
    assert refused.value.code == "docker_unavailable"


def test_the_settings_have_defaults_and_read_their_variables() -> None:
    assert SwarmSettings.from_env({}) == SwarmSettings()
    read = SwarmSettings.from_env(
        {
            "KILN_SWARM_SUBNET": "10.9.8.0/25",
            "KILN_SWARM_RELAY_PORT": "30000",
            "KILN_SWARM_IMAGE_SOURCE": "tcp://10.0.0.1:2376",
            "KILN_SWARM_DISK_ROOT": "/srv/kiln-disk",
        }
    )
    assert read == SwarmSettings(
        "10.9.8.0/25", 30000, "tcp://10.0.0.1:2376", Path("/srv/kiln-disk")
    )
    assert SwarmSettings.from_env({"KILN_SWARM_DISK_ROOT": " "}).disk_root is None


@pytest.mark.parametrize(
    ("env", "words"),
    [
        pytest.param({"KILN_SWARM_SUBNET": "10.9.8.1"}, "from /16 to /29", id="host-address"),
        pytest.param({"KILN_SWARM_SUBNET": "fd00::/64"}, "IPv4 network", id="ipv6"),
        pytest.param({"KILN_SWARM_SUBNET": "10.0.0.0/30"}, "/29", id="too-small"),
        pytest.param({"KILN_SWARM_RELAY_PORT": "80"}, "between 1024 and 65535", id="low-port"),
        pytest.param(
            {"KILN_SWARM_RELAY_PORT": "65000"}, "pass 65535", id="relay-ports-past-the-end"
        ),
        pytest.param({"KILN_SWARM_DISK_ROOT": "disk"}, "absolute path", id="relative-disk-root"),
    ],
)
def test_bad_settings_are_refused_naming_the_value(env: dict[str, str], words: str) -> None:
    with pytest.raises(SandboxConfigError, match=words) as refused:
        SwarmSettings.from_env(env)
    assert repr(next(iter(env.values()))) in str(refused.value)
