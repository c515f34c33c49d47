"""Choosing the backend: the Docker one by default, the swarm one by name; an unknown name is
refused in words naming the value and the known ones."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sandbox.backends import docker_engine, swarm
from sandbox.backends.choice import backend_opener, open_backend
from sandbox.errors import SandboxConfigError
from sandbox.settings import SandboxSettings

pytestmark = pytest.mark.anyio


def test_docker_opens_the_single_engine_backend() -> None:
    assert backend_opener("docker") is docker_engine.open_backend


def test_swarm_opens_the_swarm_backend() -> None:
    assert backend_opener("swarm") is swarm.open_backend


def test_an_unknown_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SandboxConfigError, match=r"'nomad' must be one of docker, swarm"):
        backend_opener("nomad")


async def test_the_manager_opens_nothing_for_an_unknown_backend() -> None:
    with pytest.raises(SandboxConfigError, match="'nomad'"):
        await open_backend(replace(SandboxSettings(), backend="nomad"))
