"""``kiln sandbox ls|rm|exec|reap`` against real Docker and Redis, on an instance of their own."""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import anyio
import docker
import pytest

from app.cli import main
from app.cli.sandbox_command import SUBCOMMANDS
from sandbox.lifecycle.manager import SandboxManager
from sandbox.settings import SandboxSettings
from tests.sandbox.docker_support import leftovers

pytestmark = pytest.mark.docker
EXPECT_CLEAN = True  # `kiln sandbox reap --all` must leave nothing behind
T = TypeVar("T")


def provision(template: str = "vanilla") -> str:
    """A new sandbox of the current environment's instance; its id."""

    async def run() -> str:
        manager = await SandboxManager.open(SandboxSettings.from_env())
        try:
            return (await manager.provision(template, owner="cli-owner", chat="cli-chat")).id
        finally:
            await manager.aclose()

    return in_own_thread(lambda: anyio.run(run))


def kiln(*argv: str) -> int:
    """``kiln ARGV`` in-process, in a thread of its own: the CLI runs its own event loop, and
    this session may already hold one in the test thread (the sandbox tests' async fixtures)."""
    return in_own_thread(lambda: main(list(argv)))


def in_own_thread(work: Callable[[], T]) -> T:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


@pytest.fixture(scope="module")
def sandbox_id(instance: str) -> str:
    return provision()


def test_the_subcommands_live_in_one_table() -> None:
    assert {"ls", "rm", "exec", "reap"} <= set(SUBCOMMANDS)


def test_ls_lists_the_sandbox(sandbox_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert kiln("sandbox", "ls") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["ID", "TEMPLATE", "STATE"]
    row = next(line for line in table if line.startswith(sandbox_id))
    assert row.split()[1:3] == ["vanilla", "in_use"]
    assert kiln("sandbox", "ls", "--json") == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["id"]: (r["owner"], r["chat"]) for r in records}[sandbox_id] == (
        "cli-owner",
        "cli-chat",
    )


@pytest.mark.parametrize(
    ("argv", "code", "stdout", "stderr"),
    [
        pytest.param(
            ["--", "node", "server.js", "--check"],
            0,
            "index.html present; a static site needs no build\n",
            "",
            id="allowed",
        ),
        pytest.param(["--", "ls", "no-such-file"], 2, "", "", id="the-commands-own-exit-code"),
        pytest.param(["--", "sh", "-c", "id"], 2, "", "refused: 'sh' is refused", id="shell"),
        pytest.param(["--", "npx", "cowsay"], 2, "", "npx downloads", id="npx"),
        pytest.param(["--"], 2, "", "give the command after --", id="no-command"),
    ],
)
def test_exec_applies_the_policy_and_exits_with_the_commands_code(
    sandbox_id: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    stdout: str,
    stderr: str,
) -> None:
    assert kiln("sandbox", "exec", sandbox_id, *argv) == code
    captured = capsys.readouterr()
    if stdout:
        assert captured.out == stdout
    assert stderr in captured.err


def test_exec_in_an_unknown_sandbox_fails(
    instance: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kiln("sandbox", "exec", "nosuchsandbox", "--", "ls") == 1
    assert "'nosuchsandbox'" in capsys.readouterr().err


def test_rm_destroys_a_sandbox_and_refuses_unknown_ids(
    instance: str, docker_client: docker.DockerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    doomed = provision()
    assert kiln("sandbox", "rm", doomed) == 0
    assert capsys.readouterr().out == f"removed {doomed}\n"
    assert not [name for name in leftovers(docker_client, instance) if doomed in name]
    assert kiln("sandbox", "rm", doomed) == 1
    assert f"no sandbox {doomed!r}" in capsys.readouterr().err


def test_reap_keeps_fresh_sandboxes_and_reap_all_removes_everything(
    sandbox_id: str,
    instance: str,
    docker_client: docker.DockerClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert kiln("sandbox", "reap") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "reaped 0"
    assert any(sandbox_id in name for name in leftovers(docker_client, instance))
    assert kiln("sandbox", "reap", "--all") == 0
    assert f"removed container kiln-sb-{sandbox_id}" in capsys.readouterr().out
    assert leftovers(docker_client, instance) == []
