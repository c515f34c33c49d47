"""What the manager's sandboxes run, checked before anything runs: a refused command or package
spec never reaches a container, and each sandbox has one install queue until it is forgotten.
Installs, commands and workspace reads in real sandboxes are tested through the manager
(``tests/sandbox/execution/test_commands.py``, ``test_hostile_streams.py``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sandbox.backends.docker_engine import DockerBackend
from sandbox.errors import CommandRefused, InstallRefused
from sandbox.execution.app_env import AppEnvironment
from sandbox.lifecycle.operations import SandboxOperations
from sandbox.lifecycle.provisioner import Provisioner
from tests.sandbox.docker_support import settings_for

pytestmark = pytest.mark.anyio


class Containers:
    """The manager's ``container_for``, counting lookups: none may happen here."""

    def __init__(self) -> None:
        self.looked_up: list[str] = []

    async def __call__(self, sandbox_id: str) -> Any:
        self.looked_up.append(sandbox_id)
        raise AssertionError(f"a container of {sandbox_id!r} was looked up")


def _operations(containers: Containers) -> SandboxOperations:
    """Operations whose provisioner has neither Docker nor Redis (neither may be used)."""
    nothing: Any = None
    settings = settings_for("operations-test", "redis://unused")
    provisioner = Provisioner(DockerBackend(nothing, settings), nothing, settings, time.time)
    return SandboxOperations(provisioner, containers, _no_app_env)


async def _no_app_env(sandbox_id: str) -> AppEnvironment:
    return AppEnvironment()


async def test_a_refused_command_reaches_no_container() -> None:
    containers = Containers()
    with pytest.raises(CommandRefused) as refused:
        await _operations(containers).run_command("s1", ["rm", "-rf", "/"])
    assert refused.value.code == "command_refused"
    assert containers.looked_up == []


async def test_a_refused_package_spec_reaches_no_container() -> None:
    containers = Containers()
    with pytest.raises(InstallRefused):
        await _operations(containers).install("s1", ["zod; rm -rf /"])
    assert containers.looked_up == []


def test_each_sandbox_has_one_install_queue_until_it_is_forgotten() -> None:
    operations = _operations(Containers())
    first = operations.install_queue("s1")
    assert operations.install_queue("s1") is first
    assert operations.install_queue("s2") is not first
    operations.forget("s1")
    assert operations.install_queue("s1") is not first


def test_installing_says_whether_any_sandbox_has_an_install_queued_or_running() -> None:
    operations = _operations(Containers())
    assert not operations.installing()
    operations.install_queue("s1")
    busy = operations.install_queue("s2")
    assert not operations.installing()  # queues, but nothing in them
    busy._enter()  # what run_npm and install do around their work
    assert operations.installing()
    busy._leave()
    assert not operations.installing()
