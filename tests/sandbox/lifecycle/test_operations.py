"""What the manager's sandboxes run, checked before anything runs: a refused command or package
spec never reaches a container, each sandbox has one install queue until it is forgotten, and a
warm-up its resident builder would ignore (warm for the same packages) is not sent.
Installs, commands and workspace reads in real sandboxes are tested through the manager
(``tests/sandbox/execution/test_commands.py``, ``test_hostile_streams.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from sandbox.backends.docker_engine import DockerBackend
from sandbox.errors import CommandRefused, InstallRefused
from sandbox.execution.app_env import AppEnvironment
from sandbox.execution.exec_stream import ExecResult
from sandbox.images.templates import get_template
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


class Engine:
    """A backend that runs nothing and records each exec's argv; the sandbox's container is
    ``container`` (a test replaces it)."""

    disk = None

    def __init__(self) -> None:
        self.container = "c1"
        self.execs: list[list[str]] = []

    async def container_for(self, sandbox_id: str) -> Any:
        return SimpleNamespace(id=self.container)

    async def exec(self, running: Any, argv: Sequence[str], **options: Any) -> ExecResult:
        self.execs.append(list(argv))
        return ExecResult(tuple(argv), 0, "", truncated=False, timed_out=False)


def _engine_operations(engine: Engine) -> SandboxOperations:
    nothing: Any = None
    settings = settings_for("operations-test", "redis://unused")
    provisioner = Provisioner(engine, nothing, settings, time.time)  # type: ignore[arg-type]
    return SandboxOperations(provisioner, engine.container_for, _no_app_env)


async def test_a_warm_up_of_a_builder_used_just_now_is_not_sent() -> None:
    engine, template = Engine(), get_template("vite-react")
    operations = _engine_operations(engine)
    build, warm = (template.builder_argv(warm=flag) for flag in (False, True))
    assert (await operations.run_builder("s1", template, warm=True)).exit_code == 0
    await operations.run_builder("s1", template, warm=False)
    skipped = await operations.run_builder("s1", template, warm=True)
    assert (skipped.argv, skipped.exit_code, skipped.output) == (tuple(warm), 0, "")
    assert engine.execs == [warm, build]
    await operations.run_builder("s2", template, warm=True)  # another sandbox's builder
    engine.container = "c2"  # the sandbox's container was replaced: a new builder
    await operations.run_builder("s1", template, warm=True)
    assert engine.execs == [warm, build, warm, warm]


async def test_after_a_command_the_warm_up_is_sent_again() -> None:
    engine, template = Engine(), get_template("vite-react")
    operations = _engine_operations(engine)
    await operations.run_builder("s1", template, warm=False)
    await operations.run_command("s1", ["npm", "test"])  # a command may change the packages
    await operations.run_builder("s1", template, warm=True)
    operations.forget("s1")  # the sandbox is gone
    await operations.run_builder("s1", template, warm=True)
    warm = template.builder_argv(warm=True)
    assert [argv for argv in engine.execs if argv == warm] == [warm, warm]
