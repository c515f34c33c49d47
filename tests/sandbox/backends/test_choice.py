"""Choosing the backend: the Docker one by default; a known backend whose module is not
installed, and an unknown name, are refused in words naming the value."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from sandbox.backends import docker_engine
from sandbox.backends.choice import backend_opener, open_backend
from sandbox.errors import SandboxConfigError
from sandbox.settings import SANDBOX_BACKENDS, SandboxSettings

pytestmark = pytest.mark.anyio


def test_docker_opens_the_single_engine_backend() -> None:
    assert backend_opener("docker") is docker_engine.open_backend


def test_a_known_backend_not_installed_is_refused_in_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Whatever this installation has: a backend module import finds nothing for "swarm" here.
    monkeypatch.setitem(sys.modules, SANDBOX_BACKENDS["swarm"], None)
    with pytest.raises(SandboxConfigError, match=r"KILN_SANDBOX_BACKEND='swarm': the swarm") as no:
        backend_opener("swarm")
    assert "KILN_SANDBOX_BACKEND='docker'" in str(no.value)
    assert no.value.code == "config_error"


def test_an_unknown_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SandboxConfigError, match=r"'nomad' must be one of docker, swarm"):
        backend_opener("nomad")


async def test_the_manager_opens_nothing_for_an_unknown_backend() -> None:
    with pytest.raises(SandboxConfigError, match="'nomad'"):
        await open_backend(replace(SandboxSettings(), backend="nomad"))
